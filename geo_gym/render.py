"""Pictures of a schedule: where each job ran, when, on how many GPUs; the queue; the links.

Top panel: one lane per region (region 0 on top), time in hours. Each attempt of a job is a
bar in the lane of every region on its path, as tall as its share of that region's GPUs (a
lane is the region's capacity; the bar sits on the GPUs it holds, the lowest free ones when
it started) and coloured by model; a failed attempt is hatched and ends in an x at its
failure time. Below: the queue over time (pending jobs, and failed jobs waiting to re-enter
the queue) and the inter-region links' use: alpha (Eq. 11, reserved over total inter-region
bandwidth) and the busiest link's reserved share of its bandwidth (Eq. 6 binds there).

The core keeps only each job's current attempt, so a ``ScheduleLog`` records every start as
it happens: its path, GPUs per region and b_j, and when it ends or fails, which the core
fixes at placement (non-preemptive, paper III-B2; the failure time is pre-drawn). A picture
at time t shows only what has happened by t. ``GeoPipeEnv(render_mode=...)`` and
``geo_gym.simulate(..., record=True)`` keep a log; ``plot_schedule`` draws a finished run.
Every drawing function is pure: a per-attempt table in, artists on a given Axes out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cached_property

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle

from geo_gym.costmodel import alpha, min_bandwidth_nb, t_comp_nb
from geo_gym.state import SECONDS_PER_HOUR
from geo_gym.uncertainty.failures import time_to_failure
from geo_gym.uncertainty.handler import handle_failure
from geo_gym.workload import label_columns

FIGSIZE = (10.0, 6.0)  # inches; at DPI, 800 x 480 pixels (multiples of 16, as video codecs like)
DPI = 80
LANE_FILL = 0.9  # share of a lane the region's GPUs take (the rest separates the lanes)
HATCH = "///"
LABEL_MIN_WIDTH = 0.04  # a bar is labelled when at least this share of the time axis wide
LABEL_MIN_HEIGHT = 0.15  # ... and this share of a lane tall
ATTEMPT_COLUMNS = ("job", "name", "model", "attempt", "start_h", "end_h", "running", "failed",
                   "requeue_h", "regions", "gpus_per_region", "b_gbps")
ATTEMPT_TYPES = {"job": np.int64, "attempt": np.int64, "start_h": float, "end_h": float, "running": bool,
                 "failed": bool, "requeue_h": float, "b_gbps": float}


class ScheduleLog:
    """Every attempt started in env ``e`` of a core, in start order, and what the picture needs
    of the episode: region names, capacities and link bandwidths, job names, models, submit
    times. ``record`` is called after each placement; ``attempts(now_h)`` is the table."""

    def __init__(self, core, e: int, jobs: Sequence, region_names: Sequence[str]):
        self.regions = tuple(region_names)
        self.capacity = core.cap[e].copy()
        self.bandwidth_gbps = core.bandwidth_gbps[e].copy()
        self.submit_h = core.submit_s[e, : len(jobs)] / SECONDS_PER_HOUR
        self._jobs = jobs
        self._rows: list[tuple] = []

    @cached_property
    def _labels(self) -> dict[str, list[str]]:
        return label_columns(self._jobs)  # when first drawn: an env in a render mode resets often

    @property
    def names(self) -> list[str]:
        return self._labels["name"]

    @property
    def models(self) -> list[str]:
        return self._labels["model"]

    def record(self, core, e: int, j: int, path: Sequence[int], gpus: Sequence[int]) -> None:
        """Job j has just been placed on ``path`` with ``gpus`` per path region (``sim.place``):
        log its attempt. It ends at the earlier of its completion and its pre-drawn failure (a
        completion at the same instant wins, as in ``sim._handle_ends``); a failed job
        re-enters the queue after the failure handler's delay (``sim._fail``). The env logs
        after its step, which may already have run the attempt into its failure; the core then
        has cleared b_j and the failure time, and they are taken as ``sim.place`` set them."""
        a = int(core.attempt[e, j]) - 1
        start, end = core.attempt_start_s[e, j], core.end_s[e, j]  # kept after the attempt
        if core.plen[e, j] > 0:  # running or completed: the core still holds the placement
            fail, b = core.fail_s[e, j], core.b_gbps[e, j]
        else:  # failed already (sim._fail clears both): sim.place's own expressions
            g = sum(gpus)
            fail = start + time_to_failure(core.failure_draws[e, j, a], core.failure_rate_per_gpu_h[e], g) \
                * SECONDS_PER_HOUR
            b = min_bandwidth_nb(core.activation_gbit[e, j], t_comp_nb(core.work_s[e, j], g, core.stage_overhead_s[e]))
        failed = bool(fail < end)
        requeue = math.nan
        if failed:
            _, delay_h = handle_failure(True, core.handler_u[e, j, a], core.handler_on[e], core.handler_tpr[e],
                                        core.handler_fpr[e], core.diagnosis_h[e], core.manual_h[e])
            requeue = (fail + delay_h * SECONDS_PER_HOUR) / SECONDS_PER_HOUR
        self._rows.append((j, a, start / SECONDS_PER_HOUR, min(end, fail) / SECONDS_PER_HOUR, failed, requeue,
                           tuple(int(r) for r in path), tuple(int(n) for n in gpus), float(b)))

    def attempts(self, now_h: float = math.inf) -> pd.DataFrame:
        """One row per attempt started by ``now_h`` (default: all), as seen at ``now_h``: job
        (index), name, model, attempt (0 first), start_h, end_h (``now_h`` while running),
        running, failed (by ``now_h``), requeue_h (when a failed job re-enters the queue),
        regions (indices into ``self.regions``, pipeline order), gpus_per_region, b_gbps."""
        rows = []
        for j, a, start, end, failed, requeue, path, gpus, b in self._rows:
            if start > now_h:
                continue
            running = end > now_h
            rows.append((j, self.names[j], self.models[j], a, start, min(end, now_h), running,
                         failed and not running, requeue, path, gpus, b))
        return pd.DataFrame(rows, columns=list(ATTEMPT_COLUMNS)).astype(ATTEMPT_TYPES)  # typed when empty too


def gpu_rows(attempts: pd.DataFrame, capacity: Sequence[int]) -> dict[tuple[int, int], list[tuple[int, int]]]:
    """The GPUs of each region each attempt holds, as runs of consecutive GPU numbers:
    ``{(attempt row, region): [(first GPU, count), ...]}``. An attempt takes the lowest free
    GPUs when it starts; at one instant ends come first (the core frees GPUs before it
    places). Attempts of no duration hold nothing. The core never holds more than a region's
    capacity, so every attempt fits (an error here is a recording bug)."""
    free = [np.ones(int(c), dtype=bool) for c in capacity]
    rows = list(attempts.itertuples(index=False))
    events = []
    for i, row in enumerate(rows):
        if row.end_h > row.start_h:
            events.append((row.start_h, 1, i))
            if not row.running:
                events.append((row.end_h, 0, i))
    held: dict[tuple[int, int], np.ndarray] = {}
    for _, starts, i in sorted(events):
        for region, g in zip(rows[i].regions, rows[i].gpus_per_region, strict=True):
            if not starts:
                free[region][held[i, region]] = True
                continue
            idx = np.flatnonzero(free[region])[:g]
            if len(idx) < g:
                raise RuntimeError(f"attempt {i} ({rows[i].name}) holds more GPUs than region {region} has free")
            free[region][idx] = False
            held[i, region] = idx
    return {key: _runs(idx) for key, idx in held.items()}


def _runs(idx: np.ndarray) -> list[tuple[int, int]]:
    """Sorted GPU numbers as (first, count) runs of consecutive numbers."""
    cut = np.flatnonzero(np.diff(idx) != 1) + 1
    firsts, ends = np.r_[0, cut], np.r_[cut, len(idx)]
    return [(int(idx[a]), int(b - a)) for a, b in zip(firsts, ends, strict=True)]


def _steps(times: np.ndarray, deltas: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A step function from +/- events: (times, value after everything at that instant), from 0."""
    order = np.argsort(times, kind="stable")
    t, v = times[order], np.cumsum(deltas[order], axis=0)
    last = np.r_[np.flatnonzero(np.diff(t)), len(t) - 1] if len(t) else np.zeros(0, dtype=int)
    return np.r_[0.0, t[last]], np.concatenate([np.zeros((1,) + v.shape[1:]), v[last]])


def queue_series(attempts: pd.DataFrame, submit_h: np.ndarray, now_h: float = math.inf):
    """(times, pending, delayed) by ``now_h``: pending jobs (arrived or re-queued, not started)
    and failed jobs waiting to re-enter the queue, after every event; a step function."""
    submits = submit_h[submit_h <= now_h]
    failed = attempts[attempts.failed]
    requeued = failed[failed.requeue_h <= now_h]
    times = np.concatenate([submits, attempts.start_h, failed.end_h, requeued.requeue_h]).astype(float)
    deltas = np.concatenate([
        np.tile([1, 0], (len(submits), 1)), np.tile([-1, 0], (len(attempts), 1)),
        np.tile([0, 1], (len(failed), 1)), np.tile([1, -1], (len(requeued), 1)),
    ]).reshape(-1, 2)
    t, v = _steps(times, deltas)
    return t, v[:, 0], v[:, 1]


def link_series(attempts: pd.DataFrame, bandwidth_gbps: np.ndarray, now_h: float = math.inf):
    """(times, alpha, busiest) by ``now_h``: Eq. (11)'s alpha (reserved over total inter-region
    bandwidth) and the largest reserved / bandwidth over links, after every start and end.
    A running attempt reserves b_j on each link of its path, both directions (Eq. 6)."""
    events = []
    for row in attempts.itertuples(index=False):
        links = list(zip(row.regions[:-1], row.regions[1:], strict=True))
        if links:
            events.append((row.start_h, row.b_gbps, links))
            if not row.running:
                events.append((row.end_h, -row.b_gbps, links))
    events.sort(key=lambda ev: ev[0])  # stable: a start and an end at one instant net out
    reserved = np.zeros_like(bandwidth_gbps, dtype=float)
    linked = bandwidth_gbps > 0
    times, alphas, busiest = [0.0], [0.0], [0.0]
    for t, b, links in events:
        for u, v in links:
            reserved[u, v] += b
            reserved[v, u] += b
        if times[-1] == t:  # the value after everything at that instant
            times.pop(), alphas.pop(), busiest.pop()
        times.append(t)
        alphas.append(alpha(reserved, bandwidth_gbps))
        busiest.append(float((reserved[linked] / bandwidth_gbps[linked]).max(initial=0.0)))
    return np.array(times), np.array(alphas), np.array(busiest)


def model_colors(models: Sequence[str]) -> dict[str, tuple]:
    """A fixed colour per model name (sorted), from tab10 or, beyond 10 models, tab20."""
    names = sorted(set(models))
    cmap = matplotlib.colormaps["tab10" if len(names) <= 10 else "tab20"]
    return {m: cmap(i % cmap.N) for i, m in enumerate(names)}


def draw_lanes(ax, attempts: pd.DataFrame, regions: Sequence[str], capacity: Sequence[int],
               colors: dict[str, tuple]) -> None:
    """The region lanes: lane r spans y in [r, r + 1) (region 0 on top); an attempt's bar in
    lane r covers its GPUs there (``gpu_rows``) from start_h to end_h. Each bar's ``gid`` is
    ``"name#attempt@region"``, so that it can be found again (tests, SVG)."""
    rows = list(attempts.itertuples(index=False))
    span = max(attempts.end_h.max() - attempts.start_h.min(), 1e-9) if len(attempts) else 1.0
    for (i, r), runs in gpu_rows(attempts, capacity).items():
        row, cap = rows[i], capacity[r]
        for first, count in runs:
            bar = Rectangle(
                (row.start_h, r + (1 - LANE_FILL) / 2 + LANE_FILL * first / cap),
                row.end_h - row.start_h, LANE_FILL * count / cap,
                facecolor=colors[row.model], edgecolor="black", linewidth=0.4,
                hatch=HATCH if row.failed else None, gid=f"{row.name}#{row.attempt}@{regions[r]}",
            )
            ax.add_patch(bar)
            if bar.get_width() >= LABEL_MIN_WIDTH * span and bar.get_height() >= LABEL_MIN_HEIGHT:
                # the job's name and its GPUs here, cut off at the bar's edge
                label = ax.text(row.start_h, bar.get_y() + bar.get_height() / 2, f" {row.name} ({count})",
                                fontsize=7, va="center", ha="left")
                label.set_clip_path(bar)
        if row.failed:
            first, count = runs[0]
            ax.plot(row.end_h, r + (1 - LANE_FILL) / 2 + LANE_FILL * (first + count / 2) / cap,
                    marker="x", color="black", markersize=7, markeredgewidth=2, linestyle="none")
    for r in range(1, len(regions)):
        ax.axhline(r, color="grey", linewidth=0.5, linestyle=":")
    ax.set_ylim(len(regions), 0)
    ax.set_yticks(np.arange(len(regions)) + 0.5, [f"{n} ({c})" for n, c in zip(regions, capacity, strict=True)],
                  fontsize=7)
    ax.set_ylabel("region (GPUs)")


def draw_queue(ax, times: np.ndarray, pending: np.ndarray, delayed: np.ndarray) -> None:
    ax.step(times, pending, where="post", color="tab:blue", label="pending")
    if delayed.any():
        ax.step(times, delayed, where="post", color="tab:red", label="failed, waiting to re-queue")
    ax.set_ylabel("jobs")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))


def draw_links(ax, times: np.ndarray, alphas: np.ndarray, busiest: np.ndarray) -> None:
    ax.step(times, 100 * alphas, where="post", color="tab:green", label="all links (alpha, Eq. 11)")
    ax.step(times, 100 * busiest, where="post", color="tab:purple", label="busiest link")
    ax.set_ylabel("bandwidth\nreserved (%)")
    ax.set_ylim(0, max(110 * busiest.max(initial=0.0), 1.0))
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))


def draw(fig: Figure, log: ScheduleLog, now_h: float = math.inf, title: str | None = None) -> Figure:
    """The whole picture of ``log`` as seen at ``now_h`` on ``fig`` (cleared first)."""
    fig.clear()
    # a fixed layout (not "tight"): the same frame every step, and a third of the drawing time
    lanes, queue, links = fig.subplots(3, 1, sharex=True, gridspec_kw={
        "height_ratios": [4, 1, 1], "left": 0.13, "right": 0.78, "top": 0.94, "bottom": 0.09, "hspace": 0.12})
    table = log.attempts(now_h)
    colors = model_colors(log.models)
    draw_lanes(lanes, table, log.regions, log.capacity, colors)
    draw_queue(queue, *queue_series(table, log.submit_h, now_h))
    draw_links(links, *link_series(table, log.bandwidth_gbps, now_h))
    end = now_h if math.isfinite(now_h) else max(table.end_h.max() if len(table) else 0.0,
                                                 float(log.submit_h.max(initial=0.0)))
    links.set_xlim(0, max(end, 1e-9) * 1.01)
    links.set_xlabel("time (h)")
    shown = sorted(set(table.model)) or sorted(set(log.models))
    handles = [Patch(facecolor=colors[m], edgecolor="black", label=m) for m in shown]
    if table.failed.any():
        handles.append(Line2D([], [], marker="x", color="black", linestyle="none", label="failure"))
    lanes.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    done = int((~table.running & ~table.failed).sum())
    heading = f"t = {end:.2f} h, {done} of {len(log.names)} jobs done"
    lanes.set_title(f"{title}: {heading}" if title else heading, fontsize=9)
    return fig


def to_rgb(fig: Figure) -> np.ndarray:
    """The figure as an (H, W, 3) uint8 array (Agg)."""
    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()


def plot_schedule(result, path=None, *, title: str | None = None, figsize=FIGSIZE, dpi: int = DPI) -> Figure:
    """Draw the schedule of a finished ``geo_gym.simulate(..., record=True)`` result (or a
    ``ScheduleLog``): region lanes with every attempt, the queue and link use over time.
    Returns the figure (a pyplot figure: ``plt.show()`` shows it; ``plt.close(fig)`` frees it);
    with ``path``, also saves it there (the format from the suffix: .png, .svg, .pdf)."""
    log = getattr(result, "schedule", result)
    if not isinstance(log, ScheduleLog):
        raise ValueError(
            "plot_schedule needs a result of geo_gym.simulate(..., record=True) or a ScheduleLog; "
            f"got {type(result).__name__}" + (" without a schedule (record=False)" if log is None else "")
        )
    import matplotlib.pyplot as plt

    fig = draw(plt.figure(figsize=figsize, dpi=dpi), log, title=title)
    if path is not None:
        fig.savefig(path)
    return fig
