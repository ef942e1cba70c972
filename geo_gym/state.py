"""The simulator core's state, declared field by field: shape, type, unit and meaning.

``geo_gym.sim.Core`` is built from this table and from the uncertainty sources' drawn
columns, which are declared beside their draws (``geo_gym/uncertainty/draws.py``), so a new
per-job quantity is one line here (or there) plus the code that reads or writes it. Every array has a leading env axis (N simulations
stepped together); the shapes below follow it, with K regions, J jobs (in submit order),
A pre-drawn failures per job, S retrieval-store rows, D metadata-vector dimensions and
P = J x A repair slots (each failure starts at most one repair, and a job can fail again while
the GPUs of its last failure are still being repaired).

Units are in the names: ``_s`` seconds, ``_h`` hours, ``_gbps`` Gbit/s, ``_gbit`` Gbit,
``_usd`` dollars; counts of iterations, GPUs and jobs carry none. Times are seconds on the
simulation clock, which starts at 0 with the episode.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

SECONDS_PER_HOUR = 3600.0


class Field(NamedTuple):
    name: str
    shape: str  # after the env axis: letters of K, J, A, S, D, P; "" for a scalar per env
    dtype: type
    meaning: str
    # A per-job column that loading writes (``sim.JobColumns``) has a ``fill``: the value of
    # the rows beyond the episode's jobs. None: the core sets the field itself.
    fill: object = None


# Set when an episode is loaded (``sim.load_episode``), read-only after.
STATIC: tuple[Field, ...] = (
    # the cluster
    Field("cap", "K", np.int64, "GPUs of each region (Eq. 5's G_r)"),
    Field("price", "K", np.float64, "electricity price of each region, $/kWh"),
    Field("bandwidth_gbps", "KK", np.float64, "inter-region link bandwidth B_uv"),
    Field("intra_gbps", "", np.float64, "stage-to-stage bandwidth inside a region"),
    Field("gpu_kw", "", np.float64, "power draw of one allocated GPU, kW (Eq. 4)"),
    Field("stage_overhead_s", "", np.float64, "per-stage, per-micro-batch overhead in t_comp"),
    # the jobs
    Field("n_jobs", "", np.int64, "jobs in this episode (rows beyond are unused)"),
    Field("submit_s", "J", np.float64, "submit time", 0.0),
    Field("work_s", "J", np.float64, "forward time of one micro-batch on one GPU: t_comp(L) = work_s / L + overhead", 0.0),
    Field("microbatches", "J", np.int32, "M_j, micro-batches per iteration", 0),
    Field("full_iters", "J", np.float64, "configured iterations I_j: what the user asked for", 0.0),
    Field("iters", "J", np.float64, "iterations the job actually runs (its fate, hidden)", 0.0),
    Field("end_kind", "J", np.int32, "how an early end ends: workload.END_APPLICATION_FAILURE, END_CANCELLED or END_UNKNOWN (drawn)", 0),
    Field("activation_gbit", "J", np.float64, "A_j, activations between adjacent stages", 0.0),
    Field("k_target", "J", np.int32, "GPUs the rules aim at: K* (Eq. 13) or the start rule's target", 0),
    Field("k_target_max", "", np.int64, "largest k_target of the episode: sizes the t_comp table"),
    Field("min_gpus", "J", np.int32, "fewest GPUs the job may start on (start rule, memory; geo_gym/start_rule.py)", 1),
    Field("b_target_gbps", "J", np.float64, "b_j at k_target: Eq. (10)'s sensitivity input", 0.0),
    Field("t_iter_1gpu_s", "J", np.float64, "t_iter on one GPU (Eq. 9's E_j(1) per iteration)", 0.0),
    Field("t_iter_target_s", "J", np.float64, "t_iter on k_target GPUs in one region", 0.0),
    # predictors (geo_gym/uncertainty/predictors.py)
    Field("predictor_mode", "", np.int64, "sim.PRED_STATIC or sim.PRED_RETRIEVAL"),
    Field("retrieval_k", "", np.int64, "similar finished jobs a retrieval prediction averages"),
    Field("retrieval_threshold", "", np.float64, "least cosine similarity that counts as similar"),
    Field("retrieval_records_actual", "", np.bool_, "the store records iterations run (else configured)"),
    Field("retrieval_fallback", "", np.int64, "sim.FALLBACK_USER or sim.FALLBACK_STORE_MEAN"),
    Field("metadata_vec", "JD", np.float32, "each job's hashed metadata vector"),
    # failures and the failure handler (geo_gym/uncertainty/failures.py, handler.py)
    Field("failure_rate_per_gpu_h", "", np.float64, "infrastructure failures per GPU-hour held"),
    Field("checkpoint_h", "", np.float64, "checkpoint interval: progress falls back to the last one"),
    Field("gpus_per_failure", "", np.int64, "GPUs a failure sends to repair"),
    Field("handler_on", "", np.bool_, "a SchedMate-style failure handler classifies failures"),
    Field("handler_tpr", "", np.float64, "the handler's true-positive rate"),
    Field("handler_fpr", "", np.float64, "the handler's false-positive rate"),
    Field("diagnosis_h", "", np.float64, "delay before a recognised failure's restart"),
    Field("manual_h", "", np.float64, "delay before an unrecognised failure's restart"),
    Field("app_failure_share", "", np.float64, "share of early ends of unknown kind that are application failures"),
)

# Changed by the simulation.
DYNAMIC: tuple[Field, ...] = (
    Field("now_s", "", np.float64, "the simulation clock"),
    # the cluster
    Field("free", "K", np.int64, "free GPUs of each region"),
    Field("repairing", "K", np.int64, "GPUs of each region under repair"),
    Field("reserved_gbps", "KK", np.float64, "bandwidth reserved on each directed link (Eq. 6)"),
    # kept link by link as reserved_gbps changes (sim.place, sim._release), so that a decision
    # reads them without an O(K^2) pass
    Field("residual_gbps", "KK", np.float64, "what a policy may still use on each link: sim.residual_bandwidth of the above"),
    Field("resv_nnz", "K", np.int64, "links (u, v) of each region u with reserved_gbps[u, v] != 0 ..."),
    Field("resv_cols", "KK", np.int64, "... their v: the first resv_nnz[u] entries of row u, in no particular order"),
    Field("bandwidth_total_gbps", "", np.float64, "Eq. (11)'s denominator: B_uv summed over u != v in row-major order"),
    Field("nbr_order", "KK", np.int64, "row v: the regions by unreserved usable bandwidth from v (placement.sort_neighbours), once nbr_ready[v]"),
    Field("nbr_ready", "K", np.bool_, "row v of nbr_order is sorted (on first use by Pathfinder, per episode)"),
    Field("nbr_pos", "KK", np.int64, "nbr_pos[v, u]: u's place in row v of nbr_order, once nbr_ready[v]"),
    Field("nbr_first", "K", np.int64, "row v of nbr_order has only regions without free GPUs before nbr_first[v], once nbr_ready[v] (sim._freed lowers it)"),
    # queues: index lists with a count each
    Field("status", "J", np.int8, "sim.PENDING_FUTURE, PENDING, RUNNING, DONE or DELAYED"),
    Field("next_arrival", "", np.int64, "index of the next job to be submitted"),
    Field("pending", "J", np.int32, "the queue, in submit order (re-queued jobs keep their place)"),
    Field("n_pending", "", np.int64, "length of the queue"),
    Field("queue_loose", "", np.bool_, "pending is in no order, queue_pos says where each job is (sim.loosen_queue)"),
    Field("queue_pos", "J", np.int32, "each pending job's place in pending while queue_loose"),
    Field("running", "J", np.int32, "running jobs, in no particular order"),
    Field("n_running", "", np.int64, "running jobs"),
    Field("delayed", "J", np.int32, "failed jobs waiting to re-enter the queue"),
    Field("n_delayed", "", np.int64, "failed jobs waiting"),
    Field("requeue_s", "J", np.float64, "when a failed job re-enters the queue"),
    Field("repair_end_s", "P", np.float64, "repairs in progress: when each ends"),
    Field("repair_region", "P", np.int64, "... in which region"),
    Field("repair_gpus", "P", np.int64, "... how many GPUs"),
    Field("n_repairs", "", np.int64, "repairs in progress"),
    Field("n_done", "", np.int64, "jobs that have ended"),
    # what schedulers are told
    Field("pred_iters", "J", np.float64, "predicted iterations (never the truth unless oracle)", 0.0),
    Field("pred_hit", "J", np.bool_, "the prediction came from similar finished jobs"),
    # progress and attempts
    Field("done_iters", "J", np.float64, "checkpointed progress"),
    Field("attempt", "J", np.int32, "attempts started"),
    Field("n_fail", "J", np.int32, "infrastructure failures of the job"),
    Field("n_fail_total", "", np.int64, "infrastructure failures of the episode"),
    Field("n_false_restart", "J", np.int32, "application failures of the job the handler judged infrastructure and restarted"),
    Field("n_false_restart_total", "", np.int64, "such restarts in the episode"),
    Field("rerun_gpu_h", "", np.float64, "GPU-hours held by attempts that re-ran a misjudged application failure"),
    Field("rerun_usd", "", np.float64, "electricity those attempts spent (Eq. 4)"),
    Field("start_s", "J", np.float64, "first start (NaN before it)"),
    Field("attempt_start_s", "J", np.float64, "start of the current attempt"),
    Field("end_s", "J", np.float64, "end of the current attempt if it does not fail"),
    Field("fail_s", "J", np.float64, "failure of the current attempt (inf: none)"),
    # the placement of the current attempt (paper III-B2: fixed until it ends)
    Field("t_iter_s", "J", np.float64, "iteration time on its placement (Eq. 1)"),
    Field("path", "JK", np.int32, "regions in pipeline order (-1 beyond plen); int32: J x K of them"),
    Field("plen", "J", np.int32, "regions on the path"),
    Field("alloc", "JK", np.int32, "GPUs in each region (int32, as path)"),
    Field("gpus", "J", np.int32, "GPUs held (kept after the job ends)"),
    Field("b_gbps", "J", np.float64, "b_j reserved on every crossed link, both directions (Eq. 6)"),
    Field("cost_per_s", "J", np.float64, "electricity rate while running, $/s (Eq. 4)"),
    # metrics
    Field("cost_usd", "J", np.float64, "electricity spent by the job (failed attempts included)"),
    Field("job_seconds", "", np.float64, "integral of (jobs in the system) dt: sum of JCTs once all end"),
    Field("spent_usd", "", np.float64, "electricity spent so far"),
    # the retrieval predictor's history store (predictors.store_append)
    Field("store_vecs", "DS", np.float32, "one column per stored finished job"),
    Field("store_norms", "S", np.float64, "each stored vector's norm"),
    Field("store_vals", "S", np.float64, "each stored job's iterations"),
    Field("n_store", "", np.int64, "jobs stored so far (the store wraps around)"),
)

FIELDS: tuple[Field, ...] = STATIC + DYNAMIC
NAMES: tuple[str, ...] = tuple(f.name for f in FIELDS)
# The per-job columns loading computes and ``sim.load_episode`` writes (``sim.JobColumns``).
LOADED: tuple[Field, ...] = tuple(f for f in FIELDS if f.fill is not None)


def shape_of(field: Field, num_envs: int, sizes: dict[str, int]) -> tuple[int, ...]:
    """The array shape of ``field`` for ``num_envs`` envs and the sizes K, J, A, S, D, P."""
    return (num_envs,) + tuple(sizes[x] for x in field.shape)
