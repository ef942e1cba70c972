"""Randomised invariant checks: thousands of random (and invalid) actions over random worlds."""

import numpy as np

from geo_gym import sim
from geo_gym.costmodel import alpha_nb
from geo_gym.env import GeoPipeEnv
from geo_gym.uncertainty import UncertaintyConfig


def check_state(env):
    c = env.core
    n = int(c.n_jobs[0])
    cap, free = c.cap[0], c.free[0]
    running = [j for j in range(n) if c.status[0, j] == sim.RUNNING]
    assert (free >= 0).all() and (free <= cap).all()
    held = c.alloc[0, running].sum(axis=0) if running else np.zeros_like(free)
    assert (c.repairing[0] >= 0).all()
    assert (held + free + c.repairing[0] == cap).all()  # Eq. (5), and no GPU leaks
    resv = np.zeros_like(c.reserved_gbps[0])
    for j in running:
        p = c.path[0, j, : c.plen[0, j]]
        for u, v in zip(p[:-1], p[1:], strict=True):
            resv[u, v] += c.b_gbps[0, j]
            resv[v, u] += c.b_gbps[0, j]
    assert np.allclose(resv, c.reserved_gbps[0], atol=1e-9)
    assert (c.reserved_gbps[0] <= c.bandwidth_gbps[0] + 1e-6).all()  # Eq. (6)
    # what the core keeps link by link equals the O(K^2) computations, to the bit
    eff = np.empty_like(c.residual_gbps[0])
    sim.residual_bandwidth(c.bandwidth_gbps[0], c.reserved_gbps[0], eff)
    assert np.array_equal(eff, c.residual_gbps[0])
    for u in range(c.cap.shape[1]):
        kept = sorted(c.resv_cols[0, u, : c.resv_nnz[0, u]].tolist())
        assert kept == np.flatnonzero(c.reserved_gbps[0, u]).tolist()
    assert sim.alpha_kept(c, 0) == alpha_nb(c.reserved_gbps[0], c.bandwidth_gbps[0])
    delayed = int((c.status[0, :n] == sim.DELAYED).sum())
    assert delayed == c.n_delayed[0]
    assert c.n_pending[0] + len(running) + delayed + int(c.n_done[0]) == int(c.next_arrival[0])
    assert (c.done_iters[0, :n] <= c.iters[0, :n] + 1e-9).all()
    assert (c.cost_usd[0] >= 0).all() and c.spent_usd[0] >= 0


HARSH = UncertaintyConfig.preset(
    "schedmate", failure_rate_per_gpu_hour=2e-3, checkpoint_interval_hours=2.0,
    predictor="schedmate", repair_median_hours=5.0,
    handler_precision=0.3,  # FPR 0.48: many application failures misjudged and restarted
)


def test_random_actions_keep_invariants():
    """Every uncertainty feature on in two of every three worlds (failures 100x Llama 3's rate)."""
    steps = 0
    failures = false_restarts = 0
    for world in range(80):
        env = GeoPipeEnv(
            "random",
            {"num_regions": 3 + world % 4, "mean_interarrival": [0.0, 600.0, 36000.0][world % 3]},
            window=[1, 4, 8][world % 3],
            cost_weight=0.05 * world,
            uncertainty=[None, "realistic", HARSH][world % 3],
            warmup_workloads=world % 2,
        )
        rng = np.random.default_rng(world)
        obs, info = env.reset(seed=world)
        while True:
            if rng.random() < 0.15:
                a = int(rng.integers(env.action_space.n))
            else:
                a = int(rng.choice(np.flatnonzero(info["action_mask"])))
            obs, r, term, trunc, info = env.step(a)
            steps += 1
            assert np.isfinite(obs).all() and env.observation_space.contains(obs)
            assert np.isfinite(r) and r <= 0
            check_state(env)
            if term:
                break
        c = env.core
        n = int(c.n_jobs[0])
        assert (c.status[0, :n] == sim.DONE).all() and c.n_done[0] == n  # each ends once
        assert (c.start_s[0, :n] >= c.submit_s[0, :n]).all() and (c.end_s[0, :n] > c.start_s[0, :n]).all()
        assert len(info["jobs"]) == n
        failures += info["failures"]
        false_restarts += info["false_restarts"]
        assert info["false_restarts"] == int(c.n_false_restart[0, :n].sum())
        assert info["failures"] == sum(j["failures"] for j in info["jobs"])
    assert steps > 1000
    assert failures > 50  # the failure path was exercised
    assert false_restarts > 20  # and the misjudged application failures' restarts
