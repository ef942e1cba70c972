"""One training run, as ``scripts/train_ppo.py`` runs it and each trial of ``scripts/sweep.py``.

``train_run(settings, run_dir)`` trains MaskablePPO (or PPO) on the native vector env and writes
the run folder: TensorBoard logs (tb/), last.zip and previous.zip (``agents.training.
CheckpointLast``), eval.csv and curve.png (agent vs BACE-Pipe during training), comparison.csv
(the final table on held-out seeds, with the best fixed policy of the agent's action space,
chosen on validation seeds: agents/protocol.py), protocol.json, settings.json and monitor.csv
(SB3's ``VecMonitor``: a row per training episode with its summary). With
``resume=True`` it continues the folder's last.zip (previous.zip if last.zip is broken) with the
run's own settings. The module docstring of scripts/train_ppo.py says what each file holds.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from geo_gym import cli

# torch, SB3 and pandas are imported by train_run, not here: scripts that import this module for
# its flags answer a bad flag or --help at once instead of after seconds of imports.

# One thread: the policy is small (two 128-wide layers over a shared slot encoder). On the
# 2-core machine, measured back to back at 73b681c (learn() steps/s, medians of 3 repeats of
#     python scripts/bench_training.py --threads 1 2 --repeat 3
# and the default run end to end), two threads run learn() 1.1-1.3x faster than one while the
# machine is otherwise idle, but 5-30x slower while other processes use its cores (torch's
# OpenMP threads then wait for each other), which is the shared machine's usual state.
TORCH_THREADS = 1

HELD_OUT = 1_000_000  # training draws workload seeds from the env rngs seeded with seed + i
# The options that define a run: resuming must not change them.
SETTINGS = ("scenario", "scenario_kwargs", "scenario_grid", "algo", "features", "num_envs", "seed", "cost_weight", "window",
            "uncertainty", "warmup_workloads", "n_steps", "start_rule", "learning_rate", "ent_coef", "clip_range",
            "bc_steps", "bc_epochs", "bc_teacher", "bc_learning_rate", "trace", "trace_kind", "window_days", "train_fraction", "max_jobs",
            "protocol_orders", "rules")
# agents.protocol.ORDERS (not imported here: the flags answer at once; a test checks they agree)
PROTOCOL_ORDERS = ("fcfs", "sjf", "priority", "qssf")
# geo_gym.placement.RULE_SETS' names (not imported here either; the same test checks them)
RULE_SETS = ("default", "levels")


class RunError(RuntimeError):
    """A run that cannot start or resume as asked; the message names the option or file."""


@dataclass
class TrainSettings:
    """A training run's options (scripts/train_ppo.py's flags, same names and defaults)."""

    scenario: str = "recurring"
    scenario_kwargs: dict = field(default_factory=dict)
    scenario_grid: dict = field(default_factory=dict)
    algo: str = "maskable-ppo"
    features: str = "slots"
    timesteps: int = 100_000
    num_envs: int = 16
    seed: int = 0
    cost_weight: float = 0.1
    window: int = 8
    uncertainty: str | dict = "realistic"
    warmup_workloads: int | None = None  # 2 for a scenario, 0 for a trace (resolved by train_run)
    start_rule: str | None = None  # "memory" for a scenario, the mapping's "request" for a trace
    n_steps: int = 128
    learning_rate: float = 3e-4
    ent_coef: float = 0.01
    clip_range: float = 0.2  # SB3's default
    eval_every: int = 20_000
    eval_seeds: int = 10
    final_seeds: int = 30
    checkpoint_every: int = 10_000
    torch_threads: int = TORCH_THREADS
    bc_steps: int = 0
    bc_epochs: int = 10
    bc_teacher: str = "best"
    bc_learning_rate: float | None = None  # None: PPO's learning_rate
    trace: str | None = None
    trace_kind: str | None = None
    window_days: float = 1.0
    train_fraction: float = 0.7
    max_jobs: int = 300
    protocol_orders: list = field(default_factory=lambda: list(PROTOCOL_ORDERS))
    rules: str = "default"  # the placement options per slot: geo_gym.placement.RULE_SETS

    @classmethod
    def of(cls, options) -> TrainSettings:
        """From any object or mapping with (some of) these fields, e.g. parsed arguments."""
        get = options.get if isinstance(options, dict) else lambda k, d: getattr(options, k, d)
        return cls(**{k: get(k, v) for k, v in asdict(cls()).items()})


def add_protocol_orders(parser) -> None:
    """``--protocol-orders``, shared by train_ppo.py, evaluate.py and headroom.py: the queue orders
    whose order x rule policies the best fixed policy is chosen among (agents/protocol.py; a
    repeated order is refused by ``agents.protocol.check_orders``)."""
    parser.add_argument("--protocol-orders", nargs="+", choices=PROTOCOL_ORDERS, default=list(PROTOCOL_ORDERS),
                        metavar="ORDER",
                        help="the queue orders of the protocol's fixed policies (each x every placement rule), "
                             "among which the best fixed policy is chosen")


def add_arguments(parser) -> None:
    """The flags of a run that scripts/train_ppo.py and scripts/sweep.py share: TrainSettings'
    fields but the seed, the learning rate and the budget (a sweep takes several of each)."""
    d = TrainSettings()
    parser.add_argument("--scenario", default=d.scenario)
    parser.add_argument("--scenario-kwargs", type=cli.json_object, default={}, help='JSON, e.g. \'{"num_jobs": 16}\'')
    parser.add_argument("--scenario-grid", type=cli.json_object, default={},
                        help='train over every combination of these knob values, one per episode, e.g. '
                             '\'{"population_seed": [10, 11], "mean_interarrival": [900, 1800]}\'; the held-out '
                             'workloads stay --scenario with --scenario-kwargs')
    parser.add_argument("--algo", choices=["ppo", "maskable-ppo"], default=d.algo)
    parser.add_argument("--features", choices=["slots", "attention"], default=d.features,
                        help="the network's encoder (agents/features.py): slots, or slots then self-attention over them")
    parser.add_argument("--num-envs", type=cli.positive_int, default=d.num_envs)
    parser.add_argument("--cost-weight", type=cli.cost_weight, default=d.cost_weight,
                        help="hours of JCT per dollar in the reward")
    parser.add_argument("--window", type=cli.positive_int, default=d.window)
    parser.add_argument("--warmup-workloads", type=cli.non_negative_int, default=d.warmup_workloads,
                        help="workloads pre-filling the retrieval history (default 2; with --trace: 0, the only choice)")
    parser.add_argument("--start-rule", type=cli.start_rule, default=d.start_rule,
                        help="how few GPUs a job may start on: memory | any | fraction:X | kstar | request "
                             "(default memory; with --trace the mapping's request)")
    parser.add_argument("--rules", choices=RULE_SETS, default=d.rules,
                        help="the placement options of each queue slot: default (9 rules) or levels (also "
                             "Pathfinder at the memory minimum and 1/4, 1/2, 3/4 of the way to K*: the GPU count as "
                             "part of the action); the protocol's fixed policies use the same options")
    parser.add_argument("--n-steps", type=cli.positive_int, default=d.n_steps, help="rollout length per env")
    parser.add_argument("--eval-every", type=cli.positive_int, default=d.eval_every)
    parser.add_argument("--eval-seeds", type=cli.positive_int, default=d.eval_seeds, help="held-out workloads during training")
    parser.add_argument("--final-seeds", type=cli.positive_int, default=d.final_seeds,
                        help="held-out workloads for the final table")
    parser.add_argument("--checkpoint-every", type=cli.positive_int, default=d.checkpoint_every)
    parser.add_argument("--torch-threads", type=cli.positive_int, default=d.torch_threads,
                        help="torch's intra-op threads (torch.set_num_threads); results are the same for the same "
                             "seed and thread count, not across thread counts")
    parser.add_argument("--ent-coef", type=cli.finite_non_negative, default=d.ent_coef,
                        help="PPO's entropy bonus (after behaviour cloning, 0 keeps the policy near its teacher)")
    parser.add_argument("--clip-range", type=cli.fraction, default=d.clip_range,
                        help="PPO's clip range: how far one update may move each action's probability ratio")
    parser.add_argument("--bc-steps", type=cli.non_negative_int, default=d.bc_steps,
                        help="behaviour cloning before PPO (agents/bc.py): the teacher's decisions to imitate; 0: none")
    parser.add_argument("--bc-epochs", type=cli.positive_int, default=d.bc_epochs,
                        help="passes over the behaviour-cloning decisions")
    parser.add_argument("--bc-teacher", default=d.bc_teacher,
                        help='the policy to imitate: "best" (the protocol\'s best fixed policy, chosen on validation '
                             'seeds), "rollout" (the clairvoyant rollout over it, agents/rollout.py), an <order>+<rule> '
                             'policy (e.g. priority+pathfinder_quarter) or a baseline name')
    parser.add_argument("--bc-learning-rate", type=cli.finite_positive, default=d.bc_learning_rate,
                        help="Adam's step size while cloning (default: --learning-rate); PPO then runs at --learning-rate")
    add_protocol_orders(parser)
    trace = parser.add_argument_group("training on a trace (traces/windows.py, docs/training.md)")
    trace.add_argument("--trace", metavar="PATH", default=d.trace,
                       help="train on windows of the trace's first --train-fraction, evaluate on later ones; "
                            "--scenario and --scenario-kwargs are then not used")
    trace.add_argument("--trace-kind", default=d.trace_kind, help="the file's format (traces.READERS); default: guessed")
    trace.add_argument("--window-days", type=cli.finite_positive, default=d.window_days, help="length of a window")
    trace.add_argument("--train-fraction", type=cli.fraction, default=d.train_fraction,
                       help="the part of the trace's span whose windows are trained on, in (0, 1)")
    trace.add_argument("--max-jobs", type=cli.positive_int, default=d.max_jobs, help="first jobs of each window")
    cli.add_uncertainty_flags(parser, default=d.uncertainty)


def parse_args(parser, argv=None):
    """``parser.parse_args`` with the ``--uncertainty.<field>`` flags folded into
    ``uncertainty`` (a bad value is a one-line argparse error naming the flag)."""
    args = parser.parse_args(argv)
    args.uncertainty = cli.parse_uncertainty(parser, args)
    return args


def check_settings(run: Path, settings: TrainSettings, resume: bool) -> str | None:
    """Write the run's settings (a fresh run) or check that resuming keeps them; returns a
    note when the resumed run goes on with other arithmetic (another ``machine``), which
    continues it fine but not as the uninterrupted run would have."""
    path = run / "settings.json"
    mine = {key: getattr(settings, key) for key in SETTINGS}
    if not resume:
        path.write_text(json.dumps({**mine, "machine": machine(settings)}, indent=1) + "\n")
        return None
    if not path.exists():
        return None  # a run from before settings were recorded: nothing to compare
    saved = json.loads(path.read_text())
    changed = [f"--{k.replace('_', '-')} {mine[k]!r} (the run has {saved[k]!r})"
               for k in SETTINGS if k in saved and saved[k] != mine[k]]
    if changed:
        raise RunError(f"--resume keeps the run's settings; these differ: {'; '.join(changed)}")
    here, there = machine(settings), saved.get("machine") or {}
    other = [f"{k} {here[k]!r} (the run started with {there[k]!r})" for k in here if k in there and there[k] != here[k]]
    if other:
        return ("this machine's arithmetic differs from the one the run started on, so the run goes on "
                f"as it would not have uninterrupted: {'; '.join(other)}")
    return None


def machine(settings: TrainSettings) -> dict:
    """What decides a trained run's numbers besides its settings (recorded, never compared on
    --resume): torch's thread count and the CPU vector instructions its kernels use (AVX-512,
    AVX2, ...: each sums in its own order, so the same seed trains another agent on another
    CPU, docs/training.md), and the versions of the libraries that do the arithmetic."""
    import numpy
    import sb3_contrib
    import stable_baselines3
    import torch

    return {
        "torch": torch.__version__, "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "torch_threads": settings.torch_threads, "stable_baselines3": stable_baselines3.__version__,
        "sb3_contrib": sb3_contrib.__version__, "numpy": numpy.__version__,
    }


def plot_curve(history, path: Path) -> None:
    """Agent vs BACE-Pipe (and the best fixed policy, when eval.csv has it) on the held-out
    evaluation seeds over training."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(8, 3))
    for ax, key, label in zip(axes, ["avg_jct_h", "total_cost"], ["avg JCT (h)", "total cost ($)"], strict=True):
        ax.plot(history.timesteps, history[f"agent_{key}"], marker="o", label="agent")
        ax.plot(history.timesteps, history[f"bace_{key}"], ls="--", label="BACE-Pipe")
        if f"best_{key}" in history:
            ax.plot(history.timesteps, history[f"best_{key}"], ls=":", label="best fixed")
        ax.set_xlabel("timesteps")
        ax.set_ylabel(label)
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def resolved(s: TrainSettings) -> TrainSettings:
    """``s`` with the defaults that depend on the workload filled in: a scenario trains with
    2 warm-up workloads under the memory start rule, a trace with none under the mapping's
    request rule. Warm-up workloads with a trace are an error: a held-out window's history
    would be the window itself."""
    if s.trace is not None and s.warmup_workloads:
        raise RunError("--warmup-workloads with --trace: a held-out window's warm-up history would be the window "
                       "itself; trace runs have no warm-up history (leave the flag out or give 0)")
    return replace(
        s,
        warmup_workloads=s.warmup_workloads if s.warmup_workloads is not None else (0 if s.trace else 2),
        start_rule=s.start_rule or ("request" if s.trace else "memory"),
    )


@dataclass
class Workloads:
    """Where a run trains and where it is measured. ``train``: a scenario name or a pool of
    Scenarios (a trace's training windows); ``curve``, ``validation``, ``test``: (scenario or
    list of Scenarios, one per seed; seeds) for the evaluations during training, the choice of
    the best fixed policy and the final table; ``windows``: the trace windows' start days by
    use, for protocol.json; ``note``: a line saying what was cut."""

    train: object
    train_kwargs: dict
    held_out_kwargs: dict
    curve: tuple
    validation: tuple
    test: tuple
    windows: dict = field(default_factory=dict)
    note: str = ""


def workloads(s: TrainSettings) -> Workloads:
    """Seeds of one scenario (held-out ones from ``HELD_OUT`` on), or a trace's windows:
    training windows from its first part, validation and test windows after it
    (traces/windows.py), each held-out window simulated with its own seed."""
    curve = range(HELD_OUT, HELD_OUT + s.eval_seeds)
    test = range(HELD_OUT + 10_000, HELD_OUT + 10_000 + s.final_seeds)
    validation = range(HELD_OUT + 20_000, HELD_OUT + 20_000 + s.final_seeds)
    if s.trace is None:
        train, train_kwargs, note = s.scenario, s.scenario_kwargs, ""
        if s.scenario_grid:
            from geo_gym.scenarios import scenario_mixture

            try:
                train = scenario_mixture(s.scenario, s.scenario_grid, **s.scenario_kwargs)
            except ValueError as err:
                raise RunError(f"--scenario-grid: {err}") from None
            train_kwargs = {}
            note = f"training workloads: {s.scenario} over {s.scenario_grid} (one combination per episode)"
        return Workloads(train, train_kwargs, s.scenario_kwargs, (s.scenario, curve),
                         (s.scenario, validation), (s.scenario, test), note=note)
    if s.scenario_grid:
        raise RunError("--scenario-grid with --trace: the trace's windows are the training workloads")
    from traces.readers import guess_kind, read_trace
    from traces.windows import split_windows

    path = Path(s.trace)
    if not path.is_file():
        raise RunError(f"--trace {path}: {'is not a file' if path.exists() else 'does not exist'}")
    kind = s.trace_kind or guess_kind(path)
    if kind is None:
        raise RunError(f"--trace {path}: cannot tell the format from the name; give --trace-kind")
    try:
        split = split_windows(read_trace(path, kind), s.window_days, s.train_fraction, s.max_jobs,
                              start_rule=s.start_rule)
    except (OSError, ValueError, KeyError) as err:
        raise RunError(f"--trace {path} (--trace-kind {kind}): {err}") from None
    cut = {"validation": split.validation[: s.final_seeds], "test": split.test[: s.final_seeds]}
    cut["curve"] = cut["validation"][: s.eval_seeds]
    note = (f"trace {path} [{kind}]: {split.describe()}; held out: {len(cut['validation'])} validation, "
            f"{len(cut['test'])} test windows (--final-seeds), the curve on the first {len(cut['curve'])}")
    starts = {f"{k}_window_start_days": split.starts_days[k][: len(cut.get(k, split.train))]
              for k in ("train", "validation", "test")}
    return Workloads(split.train, {}, {}, (cut["curve"], curve[: len(cut["curve"])]),
                     (cut["validation"], validation[: len(cut["validation"])]),
                     (cut["test"], test[: len(cut["test"])]), starts, note)


def behaviour_clone(model, teacher, s: TrainSettings, w: Workloads, env_kwargs: dict, run: Path, log) -> None:
    """Warm start (agents/bc.py): ``s.bc_steps`` of the teacher's decisions on training
    workloads from seeds ``s.seed + s.num_envs`` on (the training envs start at ``s.seed``; all
    far below the held-out ones), ``s.bc_epochs`` passes over them; writes ``run``/bc.csv, a
    row per pass."""
    import pandas as pd

    from agents import bc

    start = time.time()
    if s.bc_teacher == "rollout":  # the rollout policy over the best fixed one (agents/rollout.py)
        from agents import rollout

        kwargs = {k: v for k, v in env_kwargs.items() if k != "cost_weight"}
        demos = rollout.collect([teacher], s.bc_steps, w.train, w.train_kwargs, seed=s.seed + s.num_envs,
                                gamma=model.gamma, cost_weight=s.cost_weight, **kwargs)
        teacher = f"the rollout over {teacher.name}"
    else:
        demos = bc.collect(teacher, s.bc_steps, s.num_envs, w.train, w.train_kwargs, seed=s.seed + s.num_envs,
                           gamma=model.gamma, **env_kwargs)
    # at s.bc_learning_rate when given, else at the optimizer's own (PPO's) step size; PPO sets
    # its own again at its first update
    history = bc.clone(model, demos, s.bc_epochs, batch_size=model.batch_size, seed=s.seed,
                       learning_rate=s.bc_learning_rate)
    pd.DataFrame(history).rename_axis("epoch").to_csv(run / "bc.csv")
    last = history[-1]
    rate = "" if s.bc_learning_rate is None else f" at learning rate {s.bc_learning_rate:g}"
    log(f"behaviour cloning of {getattr(teacher, 'name', teacher)}: {len(demos)} decisions, {s.bc_epochs} passes{rate}, "
        f"{time.time() - start:.0f} s; the agent's most likely action is the teacher's in {100 * last['agreement']:.1f}%")


def train_run(
    s: TrainSettings, run: Path, *, resume: bool = False, progress_bar: bool = False,
    on_checkpoint: Callable[[Path, int, list], None] | None = None, log: Callable[[str], None] = print,
) -> dict:
    """Train, evaluate and write ``run``/ (see the module docstring); returns protocol.json's
    content with ``timesteps`` and ``train_s`` added. ``on_checkpoint(path, timesteps,
    eval_history)`` is called after each checkpoint is saved and verified (a sweep reports it
    to Ray Tune); ``log`` prints the progress lines and the final report."""
    s = resolved(s)
    import torch

    torch.set_num_threads(s.torch_threads)  # before any torch work
    from agents.policy import unvalidated_distributions

    with unvalidated_distributions():
        return _train_run(s, run, resume, progress_bar, on_checkpoint, log)


def _train_run(s: TrainSettings, run: Path, resume: bool, progress_bar: bool, on_checkpoint, log) -> dict:
    import numpy as np
    import pandas as pd

    import baselines
    from agents.evaluation import comparison_table, evaluate
    from agents.policy import AgentPolicy
    from agents.protocol import (
        check_orders,
        order_rule_policies,
        paired_ratio,
        select_best_fixed,
        with_objective,
    )
    from agents.training import (
        PPO_KWARGS,
        CheckpointError,
        CheckpointLast,
        CompareToBaceCallback,
        EpisodeMetrics,
        ProgressLines,
        RunSettings,
        load_model,
        make_model,
        make_vec_env,
        pick_checkpoint,
        previous_path,
    )

    try:
        orders = check_orders(s.protocol_orders)
    except ValueError as err:
        raise RunError(f"--protocol-orders: {err}") from None
    named_teacher = None
    if s.bc_teacher not in ("best", "rollout"):
        combos = order_rule_policies(rules=s.rules)
        if s.bc_teacher in combos:
            named_teacher = combos[s.bc_teacher]
        elif s.bc_teacher in baselines.names():
            named_teacher = baselines.make(s.bc_teacher, rules=s.rules)
        else:
            raise RunError(f"--bc-teacher {s.bc_teacher!r}: not a policy; use best, rollout, an <order>+<rule> policy "
                           f"({', '.join(list(combos)[:2])}, ...) or a baseline ({', '.join(baselines.names())})")
    run = Path(run)
    run.mkdir(parents=True, exist_ok=True)
    last = run / "last.zip"
    if resume and not last.exists() and not previous_path(last).exists():
        raise RunError(f"--resume: no checkpoint at {last}")
    machine_note = check_settings(run, s, resume)
    if machine_note:
        log(f"--resume: {machine_note}")
    if not resume:  # a fresh run under a used name: no stale curves next to the new ones
        for stale in ("eval.csv", "curve.png", "monitor.csv", "bc.csv"):
            (run / stale).unlink(missing_ok=True)
    env_kwargs = {
        "window": s.window,
        "cost_weight": s.cost_weight,
        "uncertainty": s.uncertainty,
        "warmup_workloads": s.warmup_workloads,
        "start_rule": s.start_rule,
        "rules": s.rules,
    }
    w = workloads(s)
    if w.note:
        log(w.note)
    env = make_vec_env(s.num_envs, w.train, w.train_kwargs, seed=s.seed, monitor_dir=run, append=resume,
                       **env_kwargs)
    if resume:
        try:
            ckpt, note = pick_checkpoint(last)
        except CheckpointError as err:
            raise RunError(f"--resume: {err}") from None
        if note:
            log(f"--resume: {note}")
        try:
            model = load_model(s.algo, ckpt, env=env)
        except (TypeError, ValueError) as err:  # another algorithm's checkpoint, another layout
            raise RunError(f"--resume: {ckpt} does not fit --algo {s.algo} and these envs: {err}") from None
        model.tensorboard_log = str(run / "tb")  # the zip remembers where it was first trained
        # fresh workloads for the resumed part, not a replay of the first ones, from env seeds
        # that stay below the held-out ones whatever the step count
        mixed = np.random.SeedSequence([s.seed, model.num_timesteps]).generate_state(1)[0]
        env.seed(int(mixed) % (HELD_OUT - s.num_envs))
    else:
        model = make_model(s.algo, env, s.seed, str(run / "tb"), features=s.features, n_steps=s.n_steps,
                           **{**PPO_KWARGS, "learning_rate": s.learning_rate, "ent_coef": s.ent_coef,
                              "clip_range": s.clip_range})
    # the strongest fixed policy of the agent's action space, chosen on seeds of its own before
    # training: the held-out evaluations and the final table compare with it, and behaviour
    # cloning may imitate it
    (test, final_seeds), (validation, validation_seeds) = w.test, w.validation
    best, _ = select_best_fixed(validation, validation_seeds, s.cost_weight, w.held_out_kwargs, env_kwargs, orders)
    best_row = f"best fixed ({best})"
    best_policy = order_rule_policies(orders, s.rules)[best]
    cloned = s.bc_steps > 0 and not resume
    if cloned:
        behaviour_clone(model, named_teacher or best_policy, s, w, env_kwargs, run, log)
    compare = CompareToBaceCallback(s.eval_every, *w.curve, w.held_out_kwargs, env_kwargs,
                                    best_fixed=(best, best_policy), cost_weight=s.cost_weight, at_start=cloned)
    saved = None if on_checkpoint is None else (lambda path, steps: on_checkpoint(path, steps, list(compare.history)))
    remaining = max(0, s.timesteps - model.num_timesteps)
    # the evaluation first: a checkpoint saved at the same step then carries it in its history
    callbacks = [RunSettings(asdict(s)), EpisodeMetrics(), compare,
                 CheckpointLast(last, s.checkpoint_every, on_save=saved)]
    if not progress_bar:  # a redirected log still shows where training is
        callbacks.append(ProgressLines(min(s.eval_every, s.checkpoint_every), s.timesteps, compare, write=log))
    start = time.time()
    model.learn(
        remaining,
        callback=callbacks,
        reset_num_timesteps=not resume,
        progress_bar=progress_bar,
        tb_log_name="ppo",
    )
    train_s = time.time() - start
    if compare.history:
        history = pd.DataFrame(compare.history)
        path = run / "eval.csv"
        if resume and path.exists():
            # rows at or after the resumed run's first evaluation belong to the continuation that
            # was lost (a run killed after writing eval.csv, resumed from a checkpoint at or
            # before them): the resumed run's rows replace them
            before = pd.read_csv(path)
            before = before[before.timesteps < history.timesteps.min()]
            history = pd.concat([before, history], ignore_index=True)
        history.to_csv(path, index=False)
        plot_curve(history, run / "curve.png")
    policies = {"agent": AgentPolicy(model)}
    policies.update({n: baselines.make(n) for n in baselines.names()})
    policies[best_row] = best_policy
    runs = evaluate(policies, test, final_seeds, w.held_out_kwargs, env_kwargs)
    table = comparison_table(runs)
    table.to_csv(run / "comparison.csv")
    per_seed = with_objective(runs, s.cost_weight).pivot(index="seed", columns="policy")
    paired = paired_ratio(per_seed["objective"]["agent"].to_numpy(), per_seed["objective"][best_row].to_numpy(),
                          seed=s.seed)
    protocol = {
        "best_fixed": best, "orders": list(orders),
        "validation_seeds": [validation_seeds.start, validation_seeds.stop - 1],
        "test_seeds": [final_seeds.start, final_seeds.stop - 1], "cost_weight": s.cost_weight,
        **w.windows,
        "objective_ratio": paired,
        "jct_ratio": float(table.loc["agent", "avg_jct_h"] / table.loc[best_row, "avg_jct_h"]),
        "cost_ratio": float(table.loc["agent", "total_cost"] / table.loc[best_row, "total_cost"]),
    }
    (run / "protocol.json").write_text(json.dumps(protocol, indent=1) + "\n")
    held_out = (f"held-out test windows starting on days {', '.join(f'{d:g}' for d in w.windows['test_window_start_days'])}"
                if w.windows else f"held-out seeds {final_seeds.start}..{final_seeds.stop - 1}")
    log(f"\ntrained {model.num_timesteps} steps in {train_s:.0f} s; {held_out}")
    log(table.round(3).to_markdown())
    chosen_on, tested_on = (
        (f"the {len(w.windows['validation_window_start_days'])} validation windows", "the test windows")
        if w.windows else (f"validation seeds {validation_seeds.start}..{validation_seeds.stop - 1}", "the test seeds")
    )
    log(
        f"\nagent / {best_row}, the best queue order x placement rule on {chosen_on}, in the trained objective "
        f"(N x avg JCT + {s.cost_weight:g} x cost) on {tested_on}: {paired['ratio']:.3f} "
        f"(95% CI {paired['ci_low']:.3f}-{paired['ci_high']:.3f}); avg JCT {protocol['jct_ratio']:.3f}x, "
        f"cost {protocol['cost_ratio']:.3f}x"
    )
    log(f"\nwrote {run}/: " + ", ".join(written(run)))
    return {**protocol, "timesteps": int(model.num_timesteps), "train_s": train_s,
            "agent_jct_vs_bace_pipe": float(table.loc["agent", "jct_vs_bace_pipe"]),
            "agent_cost_vs_bace_pipe": float(table.loc["agent", "cost_vs_bace_pipe"])}


def written(run: Path) -> list[str]:
    """The run folder's outputs that exist, with their sizes."""
    names = ("last.zip", "previous.zip", "comparison.csv", "protocol.json", "eval.csv", "curve.png", "settings.json",
             "monitor.csv", "bc.csv")
    out = [f"{name} ({size_text((run / name).stat().st_size)})" for name in names if (run / name).exists()]
    if (run / "tb").is_dir():
        out.append(f"tb/ ({sum(1 for _ in (run / 'tb').rglob('events.out.tfevents.*'))} TensorBoard event files)")
    return out


def size_text(size: int) -> str:
    return f"{size / 1e6:.1f} MB" if size >= 1e6 else f"{size / 1e3:.0f} kB" if size >= 1e3 else f"{size} B"
