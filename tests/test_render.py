"""Pictures of a schedule (geo_gym/render.py): bars where the core placed the jobs, a log that
agrees with the core at every step, recording that changes no result, and the env's render
modes as gymnasium, RecordVideo and SB3 use them."""

from __future__ import annotations

import warnings

import gymnasium as gym
import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

import baselines  # noqa: E402
import geo_gym  # noqa: E402
from geo_gym import catalog, render  # noqa: E402
from geo_gym.cluster import Cluster, Region  # noqa: E402
from geo_gym.costmodel import alpha  # noqa: E402
from geo_gym.env import GeoPipeEnv  # noqa: E402
from geo_gym.scenarios import Scenario  # noqa: E402
from geo_gym.workload import JobSpec  # noqa: E402

SMALL, MID = catalog.model_by_name("Llama-3.2-1B"), catalog.model_by_name("Qwen2.5-1.5B")
ALPACA = catalog.dataset_by_name("Alpaca-52k")


def tiny() -> Scenario:
    """Regions A (cheaper) and B, 8 GPUs each. Under cr_lcf (FCFS, cheapest regions first): a
    takes A's 8 GPUs and fails after 4 GPU-hours (0.5 h), b takes B's 8; a re-queues 2 h later
    (manual intervention, no handler) and restarts on A's 7 GPUs left while one is repaired;
    c (submitted at 60 s, 12 GPUs at once) waits for a's end and spans A and B."""
    jobs = (
        JobSpec("a", SMALL, ALPACA, max_gpus=8, failure_gpu_hours=(4.0,)),
        JobSpec("b", MID, ALPACA, max_gpus=8),
        JobSpec("c", SMALL, ALPACA, max_gpus=12, min_gpus=12, submit=60.0),
    )
    return Scenario("tiny", Cluster((Region("A", 8, 0.1, 10.0), Region("B", 8, 0.2, 10.0))), jobs)


def bars(fig) -> dict[str, matplotlib.patches.Rectangle]:
    lanes = fig.axes[0]
    return {p.get_gid(): p for p in lanes.patches if p.get_gid()}


def test_a_tiny_schedule_draws_its_bars_in_the_expected_lanes():
    result = geo_gym.simulate(tiny(), baselines.make("cr_lcf"), seed=0, record=True)
    jobs = result.jobs.set_index("name")
    # the placements the core made (its per-job table), as the docstring of tiny() says
    assert jobs.path.to_dict() == {"a": ["A"], "b": ["B"], "c": ["A", "B"]}
    assert jobs.gpus_per_region.to_dict() == {"a": [7], "b": [8], "c": [7, 5]}
    assert jobs.failures.to_dict() == {"a": 1, "b": 0, "c": 0}
    fig = geo_gym.plot_schedule(result)
    drawn = bars(fig)
    assert set(drawn) == {"a#0@A", "b#0@B", "a#1@A", "c#0@A", "c#0@B"}
    fill = render.LANE_FILL

    def check(gid, lane, start, end, gpus, failed=False):
        bar = drawn[gid]
        assert bar.get_x() == pytest.approx(start, abs=1e-9), gid
        assert bar.get_x() + bar.get_width() == pytest.approx(end, abs=1e-9), gid
        assert lane < bar.get_y() and bar.get_y() + bar.get_height() < lane + 1, gid  # inside its lane
        assert bar.get_height() == pytest.approx(fill * gpus / 8), gid
        assert (bar.get_hatch() is not None) == failed, gid

    check("a#0@A", 0, 0.0, 0.5, 8, failed=True)  # 4 GPU-hours on 8 GPUs
    check("b#0@B", 1, 0.0, jobs.end_h["b"], 8)
    check("a#1@A", 0, 2.5, jobs.end_h["a"], 7)  # re-queued 2 h after its failure, started at once
    check("c#0@A", 0, jobs.start_h["c"], jobs.end_h["c"], 7)
    check("c#0@B", 1, jobs.start_h["c"], jobs.end_h["c"], 5)
    assert jobs.start_h["c"] == pytest.approx(jobs.end_h["a"])
    # two bars of one lane never share a GPU at the same time
    for x, y in (("a#1@A", "c#0@A"), ("a#0@A", "a#1@A")):
        bx, by = drawn[x], drawn[y]
        assert bx.get_x() + bx.get_width() <= by.get_x() + 1e-12
    # the failure: an x at (0.5 h, inside lane A)
    (x_mark,) = [ln for ln in fig.axes[0].lines if ln.get_marker() == "x"]
    assert x_mark.get_xdata()[0] == pytest.approx(0.5) and 0 < x_mark.get_ydata()[0] < 1
    # colour by model: a and c (Llama-3.2-1B) share one, b (Qwen2.5-1.5B) has another
    assert drawn["a#0@A"].get_facecolor() == drawn["c#0@B"].get_facecolor() != drawn["b#0@B"].get_facecolor()
    # queue panel: c waits from 60 s until a ends; a waits to re-enter it from 0.5 h to 2.5 h
    t, pending, delayed = render.queue_series(result.schedule.attempts(), result.schedule.submit_h)
    at = lambda series, h: series[np.searchsorted(t, h, side="right") - 1]  # noqa: E731
    assert [at(pending, h) for h in (0.0, 0.1, 7.0, jobs.end_h["a"])] == [0, 1, 1, 0]
    assert [at(delayed, h) for h in (0.4, 0.5, 2.4, 2.5)] == [0, 1, 1, 0]
    plt.close(fig)


def test_plot_schedule_saves_and_refuses_a_result_without_a_schedule(tmp_path):
    result = geo_gym.simulate(tiny(), baselines.make("cr_lcf"), seed=0)
    assert result.schedule is None
    with pytest.raises(ValueError, match=r"record=True"):
        geo_gym.plot_schedule(result)
    recorded = geo_gym.simulate(tiny(), baselines.make("cr_lcf"), seed=0, record=True)
    fig = geo_gym.plot_schedule(recorded, tmp_path / "tiny.png", title="tiny")
    assert (tmp_path / "tiny.png").stat().st_size > 0
    plt.close(fig)


@pytest.mark.parametrize("policy", ["bace_pipe", "random"])  # the fast path, and the env path
def test_recording_changes_no_result(policy):
    kwargs = dict(seed=3, scenario_kwargs={"num_jobs": 30},
                  env_kwargs={"uncertainty": {"preset": "realistic", "failure_rate_per_gpu_hour": 2e-3}})
    plain = geo_gym.simulate("recurring", baselines.make(policy), **kwargs)
    recorded = geo_gym.simulate("recurring", baselines.make(policy), record=True, **kwargs)
    assert plain.summary == recorded.summary
    assert plain.jobs.equals(recorded.jobs)
    attempts = recorded.schedule.attempts()
    assert plain.summary["failures"] > 0  # the failures are exercised
    # one attempt per job plus one per failure; the last one is the core's final placement
    assert len(attempts) == len(plain.jobs) + plain.summary["failures"]
    last = attempts.groupby("job").tail(1).set_index("job").sort_index()
    names = recorded.schedule.regions
    assert [[names[r] for r in regions] for regions in last.regions] == plain.jobs.path.tolist()
    assert [list(g) for g in last.gpus_per_region] == plain.jobs.gpus_per_region.tolist()
    assert last.end_h.tolist() == pytest.approx(plain.jobs.end_h.tolist())


def test_the_log_agrees_with_the_core_at_every_step():
    """Queue, re-queue waits, running jobs and link use derived from the log equal the core's
    own state after every step of an episode with failures, among them attempts that start and
    fail within one step (the core has cleared their placement when the env logs them)."""
    env = GeoPipeEnv("recurring", {"num_jobs": 30}, render_mode="rgb_array",
                     uncertainty={"preset": "realistic", "failure_rate_per_gpu_hour": 2e-3})
    env.reset(seed=3)
    rng = np.random.default_rng(0)
    c, steps, terminated, within_one_step = env.core, 0, False, 0
    while not terminated:
        before = c.now_s[0] / 3600.0
        _, _, terminated, _, _ = env.step(int(rng.choice(np.flatnonzero(env.action_masks()))))
        steps += 1
        now = c.now_s[0] / 3600.0
        log = env.schedule.attempts(now)
        t, pending, delayed = render.queue_series(log, env.schedule.submit_h, now)
        assert (pending[-1], delayed[-1]) == (c.n_pending[0], c.n_delayed[0]), steps
        assert log.running.sum() == c.n_running[0], steps
        t, alphas, busiest = render.link_series(log, env.schedule.bandwidth_gbps, now)
        assert alphas[-1] == pytest.approx(alpha(c.reserved_gbps[0], c.bandwidth_gbps[0]), abs=1e-12), steps
        within_one_step += int((log.failed & (log.start_h >= before)).sum())
    assert c.n_fail_total[0] > 0 and within_one_step > 0
    render.gpu_rows(env.schedule.attempts(), env.schedule.capacity)  # every attempt fits its regions' GPUs


def test_rgb_array_through_gym_make():
    env = gym.make("geo_gym/GeoPipe-v0", scenario="paper-fig1", render_mode="rgb_array")
    assert env.render_mode == "rgb_array"
    assert env.metadata["render_fps"] > 0
    env.reset(seed=0)
    frame = env.render()
    assert frame.shape == (480, 800, 3) and frame.dtype == np.uint8
    while env.unwrapped.core.now_s[0] == 0:
        env.step(int(np.flatnonzero(env.unwrapped.action_masks())[0]))
    later = env.render()
    assert later.shape == frame.shape and not np.array_equal(later, frame)
    env.close()


def test_gymnasium_env_checker_renders_every_mode():
    from gymnasium.utils.env_checker import check_env

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning either (the checker warns on what it dislikes)
        check_env(gym.make("geo_gym/GeoPipe-v0", scenario="paper-fig1").unwrapped)  # made: it has a spec


def test_a_bad_render_mode_is_an_error_naming_it():
    with pytest.raises(ValueError, match="'rgb'"):
        GeoPipeEnv("paper-fig1", render_mode="rgb")
    with pytest.raises(ValueError, match="'ansi'"), pytest.warns(UserWarning, match="render_modes"):
        gym.make("geo_gym/GeoPipe-v0", scenario="paper-fig1", render_mode="ansi")
    plain = GeoPipeEnv("paper-fig1")
    plain.reset(seed=0)
    with pytest.warns(UserWarning, match="render_mode"):
        assert plain.render() is None
    assert plain.schedule is None  # no render mode: nothing logged


def test_human_mode_draws_on_every_step():
    env = GeoPipeEnv("paper-fig1", render_mode="human")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # Agg: "cannot show the figure"
        env.reset(seed=0)
        fig = env._figure
        assert plt.fignum_exists(fig.number)
        while env.core.now_s[0] == 0:  # until time passes, so that the jobs started have bars
            env.step(int(np.flatnonzero(env.action_masks())[0]))
        assert bars(fig)  # the step redrew the window
        assert env.render() is None
    env.close()
    assert not plt.fignum_exists(fig.number)


def test_record_video_writes_a_file(tmp_path):
    env = gym.make("geo_gym/GeoPipe-v0", scenario="paper-fig1", render_mode="rgb_array")
    env = gym.wrappers.RecordVideo(env, str(tmp_path / "videos"), episode_trigger=lambda _: True,
                                   disable_logger=True)
    env.reset(seed=0)
    terminated = truncated = False
    while not (terminated or truncated):
        _, _, terminated, truncated, _ = env.step(int(np.flatnonzero(env.unwrapped.action_masks())[0]))
    env.close()
    videos = list((tmp_path / "videos").glob("*.mp4"))
    assert len(videos) == 1 and videos[0].stat().st_size > 0


def test_sb3_make_vec_env_does_not_warn_about_render_modes():
    from stable_baselines3.common.env_util import make_vec_env

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        venv = make_vec_env("geo_gym/GeoPipe-v0", n_envs=1, env_kwargs={"scenario": "paper-fig1"})
    assert not [str(w.message) for w in caught if "render" in str(w.message)]
    assert venv.render_mode == "rgb_array"
    venv.close()
