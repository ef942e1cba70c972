"""How much better than the best fixed policy can a scheduler be? A one-step rollout bound.

At every decision of a ``GeoPipeEnv`` episode, the rollout policy tries each valid action on a
copy of the simulator state, lets fixed base policies (the protocol's best fixed policy, or
every queue order x placement rule) finish the episode from there on the compiled fast path
(``geo_gym.fixed``, as the protocol runs fixed policies), and takes the action whose best
finished episode has the lowest objective, N x avg JCT + cost_weight x cost
(agents/protocol.py). This is Bertsekas' rollout policy improvement, acting through the same
action space as a learned agent (its window of the queue): it is not bound to beat its base,
which sees the whole queue and may start a job the window does not show.

It is not a scheduler one could deploy: its rollouts run on the simulator's own state, so they
know what an agent's observation hides (the arrivals still to come, the iterations each job
will really run, when each attempt will fail). Its lead over the base policy is therefore an
optimistic estimate of what one step of lookahead can gain on that workload, a yardstick for
learned agents rather than a baseline they must beat. With ``depth`` d > 1 each candidate is
finished by the rollout policy of depth d - 1 instead (rollout of a rollout: a deeper search,
about (valid actions x decisions) times the cost of the depth below).
"""

from __future__ import annotations

import copy

import numpy as np

from agents.protocol import objective, order_rule_policies
from baselines.policies import FixedPolicy
from geo_gym import fixed, sim
from geo_gym.env import GeoPipeEnv, episode_summary
from geo_gym.placement import FEASIBLE


def _copy_into(dst: sim.Core, src: sim.Core) -> None:
    """dst's arrays = src's (one simulation each, the same sizes)."""
    for name in sim.FIELDS:
        np.copyto(getattr(dst, name), getattr(src, name))


def _blind(c: sim.Core) -> None:
    """What a scheduler may know, in place of the truth, in the one-simulation core ``c``: the
    jobs submitted so far and no others (the arrivals to come are unknown), each job's length
    its prediction (``pred_iters``, what the observation shows; never below the progress it has
    kept), no failure to come. A running job ends when its prediction says, not before now."""
    n = int(c.next_arrival[0])
    c.n_jobs[0] = n  # later jobs never arrive; done() and the summary count the known ones
    length = np.maximum(c.pred_iters[0, :n], c.done_iters[0, :n])
    c.iters[0, :n] = length
    c.full_iters[0, :n] = length  # ends at the prediction are completions, not early ends
    c.failure_draws[0] = np.inf
    running = c.status[0, :n] == sim.RUNNING
    c.fail_s[0, :n][running] = np.inf
    end = c.attempt_start_s[0, :n] + (length - c.done_iters[0, :n]) * c.t_iter_s[0, :n]
    c.end_s[0, :n][running] = np.maximum(end[running], c.now_s[0])


def _append_future(c: sim.Core, sample: sim.Core) -> None:
    """Append to blinded ``c`` the jobs of ``sample`` (another workload of the same scenario,
    loaded in a core of the same sizes) submitted after ``c``'s clock, as many as ``c`` has
    rows left: a sampled future of arrivals, each as long as the scheduler would be told (its
    prediction; its configured length under a retrieval predictor, which predicts on arrival),
    without failures."""
    n, rows = int(c.n_jobs[0]), c.submit_s.shape[1]
    future = np.flatnonzero(sample.submit_s[0, : int(sample.n_jobs[0])] > c.now_s[0])[: rows - n]
    m = future.size
    new = slice(n, n + m)
    for name in sim.LOADED_FIELDS:  # the rows beyond n are unarrived jobs: their dynamic state is still its reset
        getattr(c, name)[0, new] = getattr(sample, name)[0, future]
    c.metadata_vec[0, new] = sample.metadata_vec[0, future]
    told = sample.full_iters if c.predictor_mode[0] == sim.PRED_RETRIEVAL else sample.pred_iters
    c.iters[0, new] = told[0, future]
    c.full_iters[0, new] = told[0, future]
    c.failure_draws[0, new] = np.inf
    c.k_target_max[0] = max(int(c.k_target_max[0]), int(sample.k_target_max[0]))
    c.n_jobs[0] = n + m


def _objective(core: sim.Core, cost_weight: float) -> float:
    s = episode_summary(core, 0)
    return objective(s["avg_jct_h"], s["total_cost"], int(core.n_jobs[0]), cost_weight)


def _core_like(env: GeoPipeEnv) -> sim.Core:
    """An empty one-simulation core of ``env``'s sizes."""
    sizes = sim._sizes(env.core)
    return sim.allocate(1, env.num_regions, sizes["J"], sizes["A"], sizes["S"], sizes["D"])


class RolloutScheduler:
    """Chooses each action of ``env`` (a ``GeoPipeEnv``) by rollouts of the fixed policies
    ``bases``, each run as ``geo_gym.simulate`` runs it (the whole queue in view)."""

    def __init__(self, env: GeoPipeEnv, bases: list[FixedPolicy], cost_weight: float, depth: int = 1,
                 clairvoyant: bool = True, futures: int = 0, seed: int = 0):
        if not bases:
            raise ValueError("a rollout needs at least one base policy")
        if isinstance(depth, bool) or int(depth) != depth or depth < 1:
            raise ValueError(f"depth must be an integer >= 1, got {depth!r}")
        if not clairvoyant and depth > 1:
            raise ValueError("a blind rollout (clairvoyant=False) has depth 1")
        if isinstance(futures, bool) or int(futures) != futures or futures < 0 or (futures and clairvoyant):
            raise ValueError(f"futures: an integer >= 0, sampled arrivals for a blind rollout only; got {futures!r}")
        self.depth = int(depth)
        self.clairvoyant = bool(clairvoyant)
        self.futures = int(futures)
        self._future_seeds = np.random.default_rng(seed)  # the same sampled futures for every candidate
        self._samples: list[sim.Core] = []
        self._sample: sim.Core | None = None
        self.env = env
        self.bases = list(bases)
        self.cost_weight = float(cost_weight)
        self._scratch: sim.Core | None = None
        self.rollouts = 0

    def base_objective(self) -> float:
        """The best objective of letting a base policy finish the episode from here."""
        return self._finish(None)

    def act(self) -> int:
        """The valid action whose rollout ends best (ties: the lowest action index)."""
        valid = np.flatnonzero(self.env.action_masks())
        if valid.size == 1:
            return int(valid[0])
        if not self.futures:
            values = [self._finish(int(a)) for a in valid]
        else:  # the mean over sampled futures, the same ones for every candidate
            values = np.zeros(valid.size)
            for sample in self._draw_futures():
                self._sample = sample
                values += [self._finish(int(a)) for a in valid]
            self._sample = None
        return int(valid[int(np.argmin(values))])

    def _draw_futures(self) -> list[sim.Core]:
        """``futures`` workloads of the env's scenario, each loaded into a core of its own."""
        from geo_gym import loading

        env = self.env
        while len(self._samples) < self.futures:
            self._samples.append(_core_like(env))
        unc = env.uncertainty
        for core in self._samples:
            seed = int(self._future_seeds.integers(0, 2**31 - 1))
            loading._load(core, 0, env._checked_scenario(seed), np.random.default_rng(seed), unc,
                          loading._derived(unc), [])
        return self._samples

    def _finish(self, action: int | None) -> float:
        if self.depth > 1 and action is not None:
            return self._finish_deeper(action)
        return min(self._finish_with(base, action) for base in self.bases)

    def _finish_deeper(self, action: int) -> float:
        """The objective of taking ``action`` on a copy of the env, then the rollout policy of
        depth - 1 to the end."""
        env = copy.deepcopy(self.env)
        _, _, terminated, _, _ = env.step(action)
        inner = RolloutScheduler(env, self.bases, self.cost_weight, self.depth - 1)
        while not terminated:
            _, _, terminated, truncated, _ = env.step(inner.act())
            if truncated:
                return np.inf
        self.rollouts += inner.rollouts + 1
        return _objective(env.core, self.cost_weight)

    def _finish_with(self, base: FixedPolicy, action: int | None) -> float:
        env = self.env
        if self._scratch is None or self._scratch.submit_s.shape != env.core.submit_s.shape:
            self._scratch = _core_like(env)
        c = self._scratch
        _copy_into(c, env.core)
        if not self.clairvoyant:
            _blind(c)
            if self._sample is not None:
                _append_future(c, self._sample)
        if action is not None:
            if action == env.wait_action:
                sim.advance(c, 0)
            else:
                slot, rule = divmod(action, env.num_rules)
                o = env.opts
                code = sim.place(c, 0, o.win[0, slot], o.path[0, slot, rule], o.plen[0, slot, rule],
                                 o.alloc[0, slot, rule])
                if code != FEASIBLE:  # the mask offered it: the env's own step would place it
                    raise RuntimeError(f"action {action} is in the mask but cannot be placed (code {code})")
        self.rollouts += 1
        if not fixed.run_fixed_policy(c, 0, base.order_code, base.rule_code, 0, bool(base.strict)):
            return np.inf
        return _objective(c, self.cost_weight)


def rollout_episode(scenario, seed: int, bases: list[str], cost_weight: float, scenario_kwargs=None,
                    env_kwargs=None, depth: int = 1, clairvoyant: bool = True, futures: int = 0) -> dict:
    """One episode (workload ``seed``) of the rollout policy of ``depth`` over the base
    policies ``bases`` (names "<order>+<rule>"); its summary, with ``num_jobs``, the number of
    rollouts (base policies run to the end) and the objective."""
    policies = order_rule_policies(rules=(env_kwargs or {}).get("rules"))
    unknown = [b for b in bases if b not in policies]
    if unknown:
        raise ValueError(f"unknown base policy {unknown}; the order x rule policies: {sorted(policies)}")
    env = GeoPipeEnv(scenario, scenario_kwargs, cost_weight=cost_weight, job_records=False, **(env_kwargs or {}))
    env.reset(seed=int(seed))
    scheduler = RolloutScheduler(env, [policies[b] for b in bases], cost_weight, depth, clairvoyant, futures, seed)
    while True:
        _, _, terminated, truncated, _ = env.step(scheduler.act())
        if terminated:
            break
        if truncated:
            raise RuntimeError(f"seed {seed}: the rollout policy's episode was truncated (no progress)")
    return {**episode_summary(env.core, 0), "num_jobs": int(env.core.n_jobs[0]), "rollouts": scheduler.rollouts,
            "objective": _objective(env.core, cost_weight)}


def collect(bases: list[FixedPolicy], steps: int, scenario, scenario_kwargs=None, seed: int = 0,
            gamma: float = 1.0, cost_weight: float = 0.1, **env_kwargs):
    """The rollout policy's decisions as behaviour-cloning demonstrations (``agents.bc``):
    whole episodes of ``GeoPipeEnv`` seeded ``seed``, ``seed + 1``, ... until about ``steps``
    decisions, each with its observation, mask and Monte-Carlo return to the episode's end.
    The teacher sees what the observation hides, so a clone learns what of its choices the
    observation supports."""
    from agents.bc import Demonstrations

    env = GeoPipeEnv(scenario, scenario_kwargs, cost_weight=cost_weight, job_records=False, **env_kwargs)
    obs_rows, actions, masks, returns = [], [], [], []
    episode = 0
    while len(actions) < steps:
        obs, _ = env.reset(seed=seed + episode)
        episode += 1
        scheduler = RolloutScheduler(env, bases, cost_weight)
        rewards = []
        while True:
            mask = env.action_masks()
            action = scheduler.act()
            obs_rows.append(obs)
            actions.append(action)
            masks.append(mask)
            obs, reward, terminated, truncated, _ = env.step(action)
            rewards.append(reward)
            if terminated or truncated:
                break
        ahead = 0.0 if terminated else np.nan  # a truncated episode's return is unknown
        tail = []
        for reward in reversed(rewards):
            ahead = reward + gamma * ahead
            tail.append(ahead)
        returns.extend(reversed(tail))
    return Demonstrations(np.array(obs_rows, dtype=np.float32), np.array(actions, dtype=np.int64),
                          np.array(masks, dtype=bool), np.array(returns))
