"""Fixed policies (BACE-Pipe, its ablations, the paper's baselines) behind one registry.

| name | queue order | placement |
|---|---|---|
| bace_pipe | priority, Eq. (9)-(12) | Pathfinder + Cost-Min (Alg. 1 + 2) |
| bace_pipe_no_priority | FCFS | Pathfinder + Cost-Min |
| bace_pipe_no_pathfinder | priority | CR-LDF path + Cost-Min |
| bace_pipe_no_costmin | priority | Pathfinder, uniform allocation |
| lcf / ldf / cr_lcf / cr_ldf | FCFS (as in the paper) | the named rule |
| fcfs | FCFS | Pathfinder + Cost-Min |
| sjf | shortest predicted duration E_j(K*) | Pathfinder + Cost-Min |
| qssf | least predicted GPU time k_target x E_j(K*) (Helios' QSSF) | Pathfinder + Cost-Min |
| schedmate_sjf | SJF on SchedMate retrieval predictions, failure handler on | Pathfinder + Cost-Min |
| random | uniform over valid actions | (any option) |

Every rule aims at the job's k_target (geo_gym/start_rule.py): K* (paper IV-A), or the job's GPU
request when that is smaller (`JobSpec.max_gpus`); under the start rule `request` (the trace
mapping's default) exactly the request, at most the model's layer count, which can exceed K*.
No rule places a job on fewer GPUs than its start rule's minimum (by default its memory minimum).
"""

from __future__ import annotations

from baselines.policies import FixedPolicy, RandomPolicy

_FIXED = {
    "bace_pipe": ("priority", "pathfinder"),
    "bace_pipe_no_priority": ("fcfs", "pathfinder"),
    "bace_pipe_no_pathfinder": ("priority", "cr_ldf_cost_min"),
    "bace_pipe_no_costmin": ("priority", "pathfinder_uniform"),
    "lcf": ("fcfs", "lcf"),
    "ldf": ("fcfs", "ldf"),
    "cr_lcf": ("fcfs", "cr_lcf"),
    "cr_ldf": ("fcfs", "cr_ldf"),
    "fcfs": ("fcfs", "pathfinder"),
    "sjf": ("sjf", "pathfinder"),
    # Helios (Hu et al., SC'21): quasi-shortest-service-first, the SchedMate paper's baseline
    "qssf": ("qssf", "pathfinder"),
}


# SchedMate's standalone scheduler (section 4.3): SJF whose durations come from the Scheduling
# Advisor, with the Failure Handler restarting recognised infrastructure failures.
_SCHEDMATE = {"predictor": "schedmate", "predictor_kwargs": {}, "handler": True}


def names() -> list[str]:
    return list(_FIXED) + ["schedmate_sjf", "random"]


def make(name: str, num_regions: int | None = None, strict: bool = False, rules=None, **kwargs):
    """A policy by name; ``random`` takes ``seed`` (its stream for ``predict`` calls;
    ``geo_gym.simulate`` reseeds it with each episode's seed, so a simulated run depends on the
    episode seed only). ``num_regions``: the env's region count,
    needed only to read observations of envs with more than
    ``baselines.policies.MAX_INFERRED_REGIONS`` (45) regions; ``strict`` (fixed
    policies): no backfilling, only the first job in the policy's order may start; ``rules``:
    the option set of the env whose observations it reads (``geo_gym.placement.rule_set``;
    None: the default set, or for ``random`` in ``geo_gym.simulate`` the env's own)."""
    if name == "random":
        if strict:
            raise ValueError("policy 'random' has no order to be strict about")
        return RandomPolicy(num_regions=num_regions, rules=rules, **kwargs)
    if name not in _FIXED and name != "schedmate_sjf":
        raise ValueError(f"unknown policy {name!r}; known policies: {names()}")
    if kwargs:
        raise ValueError(f"policy {name!r} takes only num_regions, strict and rules, got {sorted(kwargs)}")
    if name == "schedmate_sjf":
        return FixedPolicy(
            name, "sjf", "pathfinder", uncertainty=dict(_SCHEDMATE), num_regions=num_regions, strict=strict,
            rules=rules,
        )
    order, rule = _FIXED[name]
    return FixedPolicy(name, order, rule, num_regions=num_regions, strict=strict, rules=rules)


__all__ = ["FixedPolicy", "RandomPolicy", "make", "names"]
