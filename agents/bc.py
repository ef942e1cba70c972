"""Behaviour cloning as a warm start for PPO: the agent first imitates a fixed policy.

A fixed policy (by default the best queue order x placement rule of the agent's action space,
agents/protocol.py) acts on the native vector env through the same ``predict(obs)`` as the
agent (baselines/policies.py). Its decisions, with the action masks, are the training set:

* the actor learns them by maximum likelihood under the mask (cross-entropy of the masked
  categorical distribution, as MaskablePPO's own ``evaluate_actions`` computes it);
* the critic learns the teacher's returns: each step's Monte-Carlo return to the end of its
  episode with the agent's discount (gamma = 1 in the default run: minus the rest of the
  episode's objective over its scale). Steps of episodes the collection cut off have no return
  and train the actor only.

Without the critic, PPO's first advantages would come from an untrained value function and
its first updates would pull the policy away from the teacher at random. The same network and
optimizer as PPO's are trained (``model.policy``), so PPO continues from this policy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from geo_gym.sb3 import SB3VecEnv
from geo_gym.vector import GeoPipeVectorEnv


@dataclass
class Demonstrations:
    """A teacher's decisions: observations, actions, masks, and each step's return to the end
    of its episode (NaN where the collection cut the episode off)."""

    obs: np.ndarray
    actions: np.ndarray
    masks: np.ndarray
    returns: np.ndarray

    def __len__(self) -> int:
        return len(self.actions)


def collect(teacher, steps: int, num_envs: int, scenario, scenario_kwargs=None, seed: int = 0,
            gamma: float = 1.0, **env_kwargs) -> Demonstrations:
    """``teacher``'s decisions on ``num_envs`` native envs seeded from ``seed`` (as training's
    are), about ``steps`` in all. Decisions the mask forbids (a teacher's "wait" when nothing
    can happen) are left out: they carry no choice to learn."""
    env = SB3VecEnv(GeoPipeVectorEnv(num_envs, scenario, scenario_kwargs, **env_kwargs))
    env.seed(seed)
    obs = env.reset()
    rounds = -(-steps // num_envs)
    all_obs = np.empty((rounds, num_envs, obs.shape[1]), dtype=np.float32)
    all_actions = np.empty((rounds, num_envs), dtype=np.int64)
    all_masks = np.empty((rounds, num_envs, env.action_space.n), dtype=bool)
    rewards = np.empty((rounds, num_envs))
    dones = np.empty((rounds, num_envs), dtype=bool)
    for t in range(rounds):
        masks = env.action_masks()
        actions, _ = teacher.predict(obs)
        all_obs[t], all_actions[t], all_masks[t] = obs, actions, masks
        obs, rewards[t], dones[t], _ = env.step(actions)
    env.close()
    returns = np.full((rounds, num_envs), np.nan)
    ahead = np.full(num_envs, np.nan)  # NaN: the episode had not ended when collection stopped
    for t in range(rounds - 1, -1, -1):
        ahead = np.where(dones[t], rewards[t], rewards[t] + gamma * ahead)
        returns[t] = ahead
    actions = all_actions.ravel()
    masks = all_masks.reshape(actions.size, -1)
    keep = masks[np.arange(actions.size), actions]
    return Demonstrations(all_obs.reshape(actions.size, -1)[keep], actions[keep], masks[keep], returns.ravel()[keep])


def clone(model, demos: Demonstrations, epochs: int, batch_size: int = 256, seed: int = 0,
          value_weight: float = 0.5, learning_rate: float | None = None) -> list[dict]:
    """Train ``model.policy`` (SB3 PPO or MaskablePPO) on ``demos`` for ``epochs`` passes in
    seeded random minibatches with its own optimizer (at ``learning_rate`` meanwhile, when
    given; PPO sets its own again at its first update): minus the log-likelihood of the
    teacher's actions (under the mask for MaskablePPO) plus ``value_weight`` x the critic's
    squared error on the known returns. Returns per epoch: the mean loss parts and the share
    of the teacher's actions that are the policy's most likely one."""
    policy = model.policy
    if learning_rate is not None:
        for group in policy.optimizer.param_groups:
            group["lr"] = learning_rate
    maskable = "action_masks" in policy.evaluate_actions.__code__.co_varnames
    rng = np.random.default_rng(seed)
    obs = torch.as_tensor(demos.obs)
    actions = torch.as_tensor(demos.actions)
    masks = torch.as_tensor(demos.masks)
    returns = torch.as_tensor(demos.returns, dtype=torch.float32)
    known = ~torch.isnan(returns)
    history = []
    policy.set_training_mode(True)
    for _ in range(epochs):
        sums = {"actor_loss": 0.0, "value_loss": 0.0, "agreement": 0.0}
        for idx in np.array_split(rng.permutation(len(demos)), max(1, len(demos) // batch_size)):
            i = torch.as_tensor(idx)
            kwargs = {"action_masks": masks[i]} if maskable else {}
            values, log_prob, _ = policy.evaluate_actions(obs[i], actions[i], **kwargs)
            actor_loss = -log_prob.mean()
            k = known[i]
            value_loss = ((values.flatten()[k] - returns[i][k]) ** 2).mean() if k.any() else values.sum() * 0.0
            loss = actor_loss + value_weight * value_loss
            policy.optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), model.max_grad_norm)
            policy.optimizer.step()
            with torch.no_grad():
                dist = policy.get_distribution(obs[i], **kwargs)
                agree = (dist.distribution.probs.argmax(dim=1) == actions[i]).float().mean()
            sums["actor_loss"] += float(actor_loss.detach()) * len(idx)
            sums["value_loss"] += float(value_loss.detach()) * len(idx)
            sums["agreement"] += float(agree) * len(idx)
        history.append({key: value / len(demos) for key, value in sums.items()})
    policy.set_training_mode(False)
    return history
