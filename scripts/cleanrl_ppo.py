"""Masked PPO in one readable file, CleanRL style, over the native vector env.

    python scripts/cleanrl_ppo.py --iterations 50          # a short run on paper-fig1
    python scripts/cleanrl_ppo.py --scenario recurring --num-envs 16 --iterations 200

CleanRL's ppo.py (Huang et al., 2022) with invalid-action masking (Huang & Ontañón, 2020):
the logits of masked actions are set to a large negative number before the categorical
distribution, and the masks are stored with the rollout so the update sees the same
distribution. The vector env autoresets in the step that ends an episode (SAME_STEP), so the
observation after a done is the new episode's first, as CleanRL's loop expects; truncations
(an idle env, docs/ecosystem.md) are treated as ends, as in CleanRL. Prints one line per
iteration: env steps, episodes finished, their mean return and average JCT.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical

from geo_gym import cli
from geo_gym.placement import RULE_SETS
from geo_gym.vector import GeoPipeVectorEnv

parser = argparse.ArgumentParser(description=__doc__, formatter_class=cli.HelpFormatter)
parser.add_argument("--scenario", default="paper-fig1")
parser.add_argument("--window", type=cli.positive_int, default=2, help="queue slots shown to the agent")
parser.add_argument("--rules", choices=sorted(RULE_SETS), default="default",
                    help="the placement options of each queue slot (geo_gym.placement.RULE_SETS)")
parser.add_argument("--num-envs", type=cli.positive_int, default=8)
parser.add_argument("--num-steps", type=cli.positive_int, default=64, help="steps per env per rollout")
parser.add_argument("--iterations", type=cli.positive_int, default=50)
parser.add_argument("--learning-rate", type=cli.finite_positive, default=2.5e-4)
parser.add_argument("--gamma", type=cli.fraction, default=0.99)
parser.add_argument("--gae-lambda", type=cli.fraction, default=0.95)
parser.add_argument("--minibatches", type=cli.positive_int, default=4)
parser.add_argument("--epochs", type=cli.positive_int, default=4)
parser.add_argument("--clip", type=cli.finite_positive, default=0.2)
parser.add_argument("--ent-coef", type=cli.finite_non_negative, default=0.01)
parser.add_argument("--vf-coef", type=cli.finite_non_negative, default=0.5)
parser.add_argument("--seed", type=cli.non_negative_int, default=0)
args = parser.parse_args()

torch.manual_seed(args.seed)
envs = GeoPipeVectorEnv(args.num_envs, args.scenario, window=args.window, rules=args.rules, autoreset_mode="SameStep")
n_obs, n_act = envs.single_observation_space.shape[0], envs.single_action_space.n


def layer(i, o, std=2**0.5):  # CleanRL's orthogonal init
    lin = nn.Linear(i, o)
    nn.init.orthogonal_(lin.weight, std)
    nn.init.constant_(lin.bias, 0.0)
    return lin


critic = nn.Sequential(layer(n_obs, 64), nn.Tanh(), layer(64, 64), nn.Tanh(), layer(64, 1, 1.0))
actor = nn.Sequential(layer(n_obs, 64), nn.Tanh(), layer(64, 64), nn.Tanh(), layer(64, n_act, 0.01))
optimizer = torch.optim.Adam([*critic.parameters(), *actor.parameters()], lr=args.learning_rate, eps=1e-5)


def policy(obs, mask, action=None):
    """(action, log-prob, entropy, value); masked actions get logit -1e8 (probability 0)."""
    dist = Categorical(logits=torch.where(mask, actor(obs), torch.tensor(-1e8)))
    if action is None:
        action = dist.sample()
    return action, dist.log_prob(action), dist.entropy(), critic(obs).squeeze(-1)


shape = (args.num_steps, args.num_envs)
obs_buf = torch.zeros(shape + (n_obs,))
mask_buf = torch.zeros(shape + (n_act,), dtype=torch.bool)
act_buf, logp_buf, rew_buf, done_buf, val_buf = (torch.zeros(shape) for _ in range(5))

next_obs, info = envs.reset(seed=args.seed)
next_obs, next_mask = torch.tensor(next_obs), torch.tensor(info["action_mask"])
next_done = torch.zeros(args.num_envs)
ep_return = np.zeros(args.num_envs)
for iteration in range(1, args.iterations + 1):
    returns, jcts = [], []
    for t in range(args.num_steps):
        obs_buf[t], mask_buf[t], done_buf[t] = next_obs, next_mask, next_done
        with torch.no_grad():
            action, logp, _, value = policy(next_obs, next_mask)
        act_buf[t], logp_buf[t], val_buf[t] = action, logp, value
        obs, reward, terminated, truncated, info = envs.step(action.numpy())
        done = terminated | truncated
        ep_return += reward
        if done.any():
            returns += ep_return[done].tolist()
            final = info["final_info"]
            jcts += final["avg_jct_h"][final["_avg_jct_h"] & terminated].tolist()
            ep_return[done] = 0.0
        rew_buf[t] = torch.tensor(reward, dtype=torch.float32)
        next_obs, next_mask = torch.tensor(obs), torch.tensor(info["action_mask"])
        next_done = torch.tensor(done, dtype=torch.float32)

    with torch.no_grad():  # generalized advantage estimation
        next_value = critic(next_obs).squeeze(-1)
        adv = torch.zeros(shape)
        last = torch.zeros(args.num_envs)
        for t in reversed(range(args.num_steps)):
            not_done = 1.0 - (next_done if t == args.num_steps - 1 else done_buf[t + 1])
            value_next = next_value if t == args.num_steps - 1 else val_buf[t + 1]
            delta = rew_buf[t] + args.gamma * value_next * not_done - val_buf[t]
            last = adv[t] = delta + args.gamma * args.gae_lambda * not_done * last
        ret = adv + val_buf

    b_obs, b_mask = obs_buf.reshape(-1, n_obs), mask_buf.reshape(-1, n_act)
    b_act, b_logp, b_adv, b_ret = (x.reshape(-1) for x in (act_buf, logp_buf, adv, ret))
    batch = args.num_steps * args.num_envs
    for _ in range(args.epochs):
        for idx in torch.randperm(batch).chunk(args.minibatches):
            _, logp, entropy, value = policy(b_obs[idx], b_mask[idx], b_act[idx].long())
            ratio = (logp - b_logp[idx]).exp()
            a = b_adv[idx]
            a = (a - a.mean()) / (a.std() + 1e-8)
            pg_loss = torch.max(-a * ratio, -a * ratio.clamp(1 - args.clip, 1 + args.clip)).mean()
            v_loss = 0.5 * ((value - b_ret[idx]) ** 2).mean()
            loss = pg_loss + args.vf_coef * v_loss - args.ent_coef * entropy.mean()
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_([*critic.parameters(), *actor.parameters()], 0.5)
            optimizer.step()
    mean_return = np.mean(returns) if returns else float("nan")
    mean_jct = np.mean(jcts) if jcts else float("nan")
    print(f"iteration {iteration}: {iteration * batch} steps, {len(returns)} episodes, "
          f"mean return {mean_return:.3f}, avg JCT {mean_jct:.2f} h", flush=True)
