"""Trace readers: real files from the shared folder (skipped when absent) checked against
/work/shared/traces/README.md and hand-computed rows, plus malformed-input tests.

Real traces are never copied into the repository. The folder is ``../shared/traces`` relative to
the repository root, or ``$GEO_GYM_TRACES_DIR``.
"""

from __future__ import annotations

import gzip
import json
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from traces import (
    COLUMNS,
    TraceFormatError,
    read_acme,
    read_marwage_jobs,
    read_philly_job_log,
    read_philly_rfold,
    read_philly_titansched,
    read_trace,
    validate_job_table,
)
from traces.acme import KALOS_COLUMNS, SEREN_COLUMNS

TRACES_DIR = Path(os.environ.get("GEO_GYM_TRACES_DIR")
                  or Path(__file__).resolve().parents[1].parent / "shared" / "traces")
PHILLY = TRACES_DIR / "philly"
RAW_SUBSET = PHILLY / "cluster_job_log_2017-10-07_subset.json.gz"
MARWAGE = PHILLY / "marwage_jobs_ge4gpu_pass.json.gz"
RFOLD = PHILLY / "rfold_philly_trace.csv.gz"
TITANSCHED = PHILLY / "titansched_philly.csv.gz"

# Absolute seconds of the raw subset's first submit (2017-10-07 00:00:59), for hand checks.
SUBSET_T0 = pd.Timestamp("2017-10-07 00:00:59")


def _need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"real trace {path} not present (set GEO_GYM_TRACES_DIR to the shared "
                    f"traces folder to run this test)")
    return path


def _rel(ts: str, t0: pd.Timestamp = SUBSET_T0) -> float:
    return (pd.Timestamp(ts) - t0).total_seconds()


@pytest.fixture(scope="module")
def raw_subset() -> pd.DataFrame:
    return read_philly_job_log(_need(RAW_SUBSET))


@pytest.fixture(scope="module")
def marwage() -> pd.DataFrame:
    return read_marwage_jobs(_need(MARWAGE))


@pytest.fixture(scope="module")
def rfold() -> pd.DataFrame:
    return read_philly_rfold(_need(RFOLD))


@pytest.fixture(scope="module")
def titansched() -> pd.DataFrame:
    return read_philly_titansched(_need(TITANSCHED))


def _common_checks(df: pd.DataFrame, n: int) -> None:
    assert tuple(df.columns) == COLUMNS
    assert len(df) == n
    validate_job_table(df)
    assert df["submit"].min() == 0.0
    assert (df["duration"].dropna() >= 0).all()


# ------------------------------------------------------------------ Philly raw job log (subset)
def test_raw_subset_counts_and_ranges(raw_subset: pd.DataFrame) -> None:
    _common_checks(raw_subset, 452)
    started = raw_subset[raw_subset["num_attempts"] > 0]
    assert len(started) == 449  # 3 jobs (2 Killed, 1 Failed) never started
    assert (started["gpus"] >= 1).all()
    assert (raw_subset.loc[raw_subset["num_attempts"] == 0, "gpus"] == 0).all()
    assert (raw_subset["queue"].dropna() >= 0).all()
    assert raw_subset["job_id"].is_unique
    assert raw_subset.attrs["t0"] == "2017-10-07 00:00:59"
    # README: 7.1 % with >= 8 GPUs (32 of the 449 started jobs).
    assert (started["gpus"] >= 8).sum() == 32


def test_raw_subset_state_mix(raw_subset: pd.DataFrame) -> None:
    share = raw_subset["state"].value_counts(normalize=True)
    for state, expected in {"COMPLETED": 0.73, "FAILED": 0.19, "CANCELLED": 0.08}.items():
        assert share[state] == pytest.approx(expected, abs=0.01), state
    assert set(share.index) == {"COMPLETED", "FAILED", "CANCELLED"}


def test_raw_subset_multi_attempts(raw_subset: pd.DataFrame) -> None:
    assert (raw_subset["num_attempts"] > 1).sum() == 81
    counts = raw_subset["num_attempts"].value_counts().to_dict()
    assert counts == {1: 368, 5: 54, 2: 17, 3: 7, 4: 3, 0: 3}


def test_raw_subset_hand_picked_rows(raw_subset: pd.DataFrame) -> None:
    rows = raw_subset.set_index("job_id")
    # application_1506638472019_14199: Pass, 8 GPUs on m47 then m412; submitted 01:11:39,
    # attempts 01:12:09-01:13:23 (74 s) and 01:13:30 -> 10-09 06:53:12 (193,182 s).
    job = rows.loc["application_1506638472019_14199"]
    assert job["state"] == "COMPLETED" and job["gpus"] == 8 and job["gpus_per_node"] == 8.0
    assert job["submit"] == _rel("2017-10-07 01:11:39") == 4240.0
    assert job["queue"] == 30.0
    assert job["duration"] == 74.0 + 193_182.0
    assert job["attempts"] == ((_rel("2017-10-07 01:12:09"), _rel("2017-10-07 01:13:23")),
                               (_rel("2017-10-07 01:13:30"), _rel("2017-10-09 06:53:12")))
    assert (job["user"], job["vc"], job["type"]) == ("ce2f4c", "ee9e8c", None)
    assert math.isnan(job["fail_time"])
    # application_1506638472019_14283: Failed, one attempt on 4 machines x 4 GPUs,
    # 05:53:04 submit, 05:53:19 -> 10-15 14:10:44 (8 d 8 h 17 min 25 s = 721,045 s).
    job = rows.loc["application_1506638472019_14283"]
    assert job["state"] == "FAILED" and job["gpus"] == 16 and job["gpus_per_node"] == 4.0
    assert job["queue"] == 15.0 and job["duration"] == 721_045.0
    assert job["fail_time"] == _rel("2017-10-15 14:10:44") == 742_185.0
    # application_1506638472019_14192: the first attempt's end_time is the string "None":
    # kept as NaN, so the total run time is unknown (NaN), the job is not dropped.
    job = rows.loc["application_1506638472019_14192"]
    assert job["num_attempts"] == 2 and math.isnan(job["attempts"][0][1])
    assert job["attempts"][0][0] == _rel("2017-10-07 00:37:19")
    assert math.isnan(job["duration"]) and job["queue"] == 199.0
    assert job["fail_time"] == _rel("2017-10-07 00:54:15")
    # application_1506638472019_14314: Killed before it ever started.
    job = rows.loc["application_1506638472019_14314"]
    assert job["state"] == "CANCELLED" and job["attempts"] == () and job["gpus"] == 0
    assert math.isnan(job["queue"]) and math.isnan(job["duration"])


# ------------------------------------------------------------------ marwage jobs.json
def test_marwage(marwage: pd.DataFrame) -> None:
    _common_checks(marwage, 3034)
    assert (marwage["gpus"] >= 4).all() and (marwage["state"] == "COMPLETED").all()
    assert (marwage["num_attempts"] > 1).sum() == 816
    assert marwage["num_attempts"].value_counts().to_dict() == {1: 2218, 2: 442, 3: 180,
                                                                 4: 122, 5: 72}
    # README: >= 52 % of these jobs use >= 8 GPUs.
    assert (marwage["gpus"] >= 8).mean() == pytest.approx(0.52, abs=0.01)
    # application_1506638472019_14164: 4 GPUs, submitted 10-06 23:27:26, attempts
    # 23:27:35-04:02:10 (16,475 s), 04:02:24 -> 10-09 02:19:15 (166,611 s), 02:49:20-06:45:55
    # (14,195 s); runtime in the file = 3318.33 min = last end - first start.
    job = marwage.set_index("job_id").loc["application_1506638472019_14164"]
    assert job["gpus"] == 4 and job["queue"] == 9.0 and job["num_attempts"] == 3
    assert job["duration"] == 16_475.0 + 166_611.0 + 14_195.0
    first_start, last_end = job["attempts"][0][0], job["attempts"][-1][1]
    assert (last_end - first_start) / 60 == pytest.approx(3318.3333333333335)


# ------------------------------------------------------------------ RFold / TitanSched CSVs
def test_rfold(rfold: pd.DataFrame) -> None:
    _common_checks(rfold, 111_549)
    assert (rfold["gpus"] >= 1).all() and (rfold["state"] == "UNKNOWN").all()
    assert rfold.attrs["t0"] is None
    assert rfold["duration"].median() == 1321.0
    sizes = rfold["gpus"].value_counts()
    assert sizes[1] == 96_662 and sizes[8] == 5_716 and sizes[128] == 11
    assert (rfold["gpus_per_node"] < rfold["gpus"]).sum() == 3_696  # multi-machine jobs
    rows = rfold.set_index("job_id")
    # "112,2601211.0,CLOS,8+8,16,1453510.0"
    assert tuple(rows.loc["112", ["submit", "gpus", "gpus_per_node", "duration"]]) == (
        2_601_211.0, 16, 8.0, 1_453_510.0)
    # "218,3104565.0,CLOS,2+2+2+2,8,795109.0"
    assert rows.loc["218", "gpus_per_node"] == 2.0 and rows.loc["218", "gpus"] == 8


def test_titansched(titansched: pd.DataFrame) -> None:
    _common_checks(titansched, 82_247)
    assert (titansched["gpus"] >= 1).all()
    assert titansched["submit"].is_monotonic_increasing
    assert titansched["vc"].nunique() == 15
    assert titansched["duration"].median() == 1144.0
    assert (titansched["gpus"] >= 8).mean() == pytest.approx(0.023, abs=0.001)
    assert titansched.attrs["t0"] == "2017-09-04 10:30:41"
    # First data row of the file: "2017-10-09 07:01:55,66.0,1,66.0,11cb48" -> job_id "0".
    job = titansched.set_index("job_id").loc["0"]
    t0 = pd.Timestamp("2017-09-04 10:30:41")
    assert job["submit"] == _rel("2017-10-09 07:01:55", t0) == 35 * 86_400 - 12_526
    assert (job["duration"], job["gpus"], job["vc"]) == (66.0, 1, "11cb48")


def test_read_trace_dispatch(raw_subset: pd.DataFrame) -> None:
    again = read_trace(RAW_SUBSET)
    pd.testing.assert_frame_equal(again, raw_subset)
    with pytest.raises(ValueError, match="philly_rfold"):
        read_trace(RAW_SUBSET, kind="nope")


# ================================================================== malformed input
GOOD_JOB = {
    "status": "Pass", "vc": "v1", "jobid": "app_1", "user": "u1",
    "submitted_time": "2017-10-07 00:00:00",
    "attempts": [{"start_time": "2017-10-07 00:00:10", "end_time": "2017-10-07 00:01:10",
                  "detail": [{"ip": "m1", "gpus": ["gpu0", "gpu1"]}]}],
}


def _write_json(tmp_path: Path, obj, name: str = "log.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(obj))
    return path


def _job(**changes):
    job = json.loads(json.dumps(GOOD_JOB))
    job.update(changes)
    return job


def _assert_names(exc: pytest.ExceptionInfo, path: Path, row: str, column: str) -> None:
    msg = str(exc.value)
    assert str(path) in msg, msg
    assert f"row {row}" in msg, msg
    assert repr(column) in msg, msg


def test_job_log_good_and_gzip(tmp_path: Path) -> None:
    path = tmp_path / "log.json.gz"
    with gzip.open(path, "wt") as fh:
        json.dump([GOOD_JOB, _job(jobid="app_2", status="Running", attempts=[
            {"start_time": "2017-10-07 00:05:00", "end_time": None, "detail": []}])], fh)
    df = read_philly_job_log(path)
    assert df["gpus"].tolist() == [2, 0] and df["state"].tolist() == ["COMPLETED", "RUNNING"]
    assert df["duration"].iloc[0] == 60.0 and math.isnan(df["duration"].iloc[1])
    assert df["attempts"].iloc[1][0][0] == 300.0 and math.isnan(df["attempts"].iloc[1][0][1])


@pytest.mark.parametrize(("job", "column"), [
    (_job(status="Weird"), "status"),
    (_job(submitted_time="07/10/2017"), "submitted_time"),
    (_job(submitted_time=None), "submitted_time"),
    ({k: v for k, v in GOOD_JOB.items() if k != "user"}, "user"),
    (_job(attempts=[{"start_time": None, "end_time": None, "detail": []}]),
     "attempts[0].start_time"),
    (_job(attempts=[{"start_time": "2017-10-07 00:02:00", "end_time": "2017-10-07 00:01:00",
                     "detail": []}]), "attempts[0].end_time"),
    (_job(attempts=[{"start_time": "2017-10-06 00:00:00", "end_time": None, "detail": []}]),
     "attempts[0].start_time"),
])
def test_job_log_malformed(tmp_path: Path, job, column: str) -> None:
    path = _write_json(tmp_path, [GOOD_JOB, job])
    with pytest.raises(ValueError) as exc:
        read_philly_job_log(path)
    msg = str(exc.value)
    assert str(path) in msg and repr(column) in msg, msg
    assert "row 1 (jobid app_1)" in msg or "jobid app_1" in msg, msg


def test_job_log_bad_json(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('[{"status": "Pass",,}]')
    with pytest.raises(ValueError, match="invalid JSON") as exc:
        read_philly_job_log(path)
    assert str(path) in str(exc.value) and "line 1" in str(exc.value)


@pytest.mark.parametrize(("change", "column"), [
    ({"num_gpus": -4}, "num_gpus"),
    ({"runtime": -1.0}, "runtime"),
    ({"submitted_time": "yesterday"}, "submitted_time"),
])
def test_marwage_malformed(tmp_path: Path, change, column: str) -> None:
    good = {"id": "a", "num_gpus": 4, "runtime": 1.0, "submitted_time": "2017-10-07 00:00:00",
            "attempts": [{"start_time": "2017-10-07 00:00:01", "end_time": "2017-10-07 00:01:01"}]}
    path = _write_json(tmp_path, [good, {**good, "id": "b", **change}], "jobs.json")
    with pytest.raises(ValueError) as exc:
        read_marwage_jobs(path)
    _assert_names(exc, path, "1 (id b)", column)


RFOLD_HEADER = "#job id,arrival time (sec),topology,shape,size,duration (sec)\n"


@pytest.mark.parametrize(("line", "column"), [
    ("1,5.0,CLOS,1,-1,10.0", "size"),
    ("1,5.0,CLOS,1,1,-10.0", "duration (sec)"),
    ("1,abc,CLOS,1,1,10.0", "arrival time (sec)"),
    ("1,5.0,CLOS,4+4,4,10.0", "shape"),
])
def test_rfold_malformed(tmp_path: Path, line: str, column: str) -> None:
    path = tmp_path / "rfold.csv"
    path.write_text(RFOLD_HEADER + "0,0.0,CLOS,8+8,16,3.0\n" + line + "\n")
    with pytest.raises(ValueError) as exc:
        read_philly_rfold(path)
    _assert_names(exc, path, "1", column)


def test_rfold_missing_column(tmp_path: Path) -> None:
    path = tmp_path / "rfold.csv"
    path.write_text("#job id,arrival time (sec),topology,shape,duration (sec)\n0,0,CLOS,1,3\n")
    with pytest.raises(ValueError) as exc:
        read_philly_rfold(path)
    _assert_names(exc, path, "header", "size")


@pytest.mark.parametrize(("line", "column"), [
    ("2017-13-45 00:00:00,10.0,1,10.0,c1", "timestamp"),
    ("2017-10-07 00:00:00,10.0,-2,-20.0,c1", "num_gpus"),
    ("2017-10-07 00:00:00,-10.0,1,-10.0,c1", "duration"),
    ("2017-10-07 00:00:00,10.0,2,10.0,c1", "gpu_time"),
])
def test_titansched_malformed(tmp_path: Path, line: str, column: str) -> None:
    path = tmp_path / "titansched.csv"
    path.write_text("timestamp,duration,num_gpus,gpu_time,cluster\n"
                    "2017-10-07 00:00:00,10.0,1,10.0,c1\n" + line + "\n")
    with pytest.raises(ValueError) as exc:
        read_philly_titansched(path)
    _assert_names(exc, path, "1", column)


def _acme_row(cluster: str, **changes) -> dict[str, str]:
    row = {"job_id": "j1", "user": "u1", "node_num": "1", "gpu_num": "8", "cpu_num": "128",
           "type": "SFT", "state": "COMPLETED", "submit_time": "2023-03-01 00:00:00+08:00",
           "start_time": "2023-03-01 00:00:05+08:00", "end_time": "2023-03-01 00:01:05+08:00",
           "duration": "60", "queue": "5", "gpu_time": "480"}
    if cluster == "kalos":
        row.update({"mem_per_pod_GB": "1024", "shared_mem_per_pod": "512", "fail_time": "",
                    "stop_time": ""})
    row.update(changes)
    return row


def _write_acme(tmp_path: Path, cluster: str, rows: list[dict[str, str]]) -> Path:
    columns = SEREN_COLUMNS if cluster == "seren" else KALOS_COLUMNS
    path = tmp_path / f"trace_{cluster}.csv"
    pd.DataFrame(rows)[list(columns)].to_csv(path, index=False)
    return path


@pytest.mark.parametrize("cluster", ["seren", "kalos"])
def test_acme_good_rows(tmp_path: Path, cluster: str) -> None:
    rows = [_acme_row(cluster),
            _acme_row(cluster, job_id="j2", gpu_num="0", node_num="1", type="CPU",
                      state="CANCELLED", submit_time="2023-02-28 16:00:10+00:00",
                      start_time="", end_time="", duration="0", queue="", gpu_time="0")]
    path = _write_acme(tmp_path, cluster, rows)
    df = read_acme(path)
    assert df.attrs["cluster"] == cluster and df.attrs["t0"] == "2023-03-01T00:00:00+08:00"
    # tz-aware: 16:00:10 UTC is 00:00:10 at +08:00, i.e. 10 s after the first submit.
    assert df["submit"].tolist() == [0.0, 10.0]
    assert df["attempts"].tolist() == [((5.0, 65.0),), ()]
    assert df["gpus_per_node"].iloc[0] == 8.0 and math.isnan(df["gpus_per_node"].iloc[1])
    assert math.isnan(df["queue"].iloc[1])
    only_gpu = read_acme(path, gpu_only=True)
    assert only_gpu["job_id"].tolist() == ["j1"]


@pytest.mark.parametrize(("cluster", "change", "column"), [
    ("seren", {"state": "RUNNING"}, "state"),       # RUNNING is Kalos-only
    ("kalos", {"state": "PREEMPTED"}, "state"),     # PREEMPTED is Seren-only
    ("seren", {"gpu_num": "-1"}, "gpu_num"),
    ("seren", {"duration": "-5"}, "duration"),
    ("seren", {"submit_time": "not a time"}, "submit_time"),
    ("kalos", {"fail_time": "2023-13-01 00:00:00+08:00"}, "fail_time"),
    ("seren", {"end_time": "2023-03-01 00:00:01+08:00"}, "end_time"),
    ("seren", {"submit_time": "2023-03-01 00:00:00"}, "submit_time"),  # read as UTC: 8 h off
    ("kalos", {"fail_time": "2023-03-01 00:00:30"}, "fail_time"),
    ("seren", {"start_time": "2023-02-28 23:59:00+08:00"}, "start_time"),  # before its submit
    ("seren", {"node_num": "0"}, "node_num"),  # 8 GPUs on no node
])
def test_acme_malformed(tmp_path: Path, cluster: str, change, column: str) -> None:
    path = _write_acme(tmp_path, cluster, [_acme_row(cluster), _acme_row(cluster, **change)])
    with pytest.raises(ValueError) as exc:
        read_acme(path, cluster=cluster)
    _assert_names(exc, path, "1", column)


def test_acme_missing_column(tmp_path: Path) -> None:
    path = _write_acme(tmp_path, "seren", [_acme_row("seren")])
    pd.read_csv(path).drop(columns=["queue"]).to_csv(path, index=False)
    with pytest.raises(ValueError) as exc:
        read_acme(path)
    _assert_names(exc, path, "header", "queue")


def test_validate_job_table_names_source_and_column(tmp_path: Path) -> None:
    path = _write_acme(tmp_path, "seren", [_acme_row("seren")])
    df = read_acme(path)
    bad = df.copy()
    bad.loc[0, "state"] = "DONE"
    with pytest.raises(ValueError, match=r"my-source: row 0, column 'state'"):
        validate_job_table(bad, "my-source")
    bad = df.copy()
    bad["gpus"] = bad["gpus"].astype(float)
    with pytest.raises(ValueError, match=r"column 'gpus'.*int64"):
        validate_job_table(bad, "my-source")
    with pytest.raises(ValueError, match="column 'type'"):
        validate_job_table(df.drop(columns=["type"]), "my-source")
    bad = df.copy()
    bad["num_attempts"] = np.int64(3)
    with pytest.raises(ValueError, match="column 'num_attempts'"):
        validate_job_table(bad, "my-source")


def test_a_truncated_gzip_names_the_file(tmp_path: Path) -> None:
    rows = "".join(f"{i},{i * 10},CLOS,1,1,{100 + i}\n" for i in range(2000))
    blob = gzip.compress((RFOLD_HEADER + rows).encode())
    path = tmp_path / "cut_philly_trace.csv.gz"
    path.write_bytes(blob[: len(blob) // 2])  # a download that stopped half-way
    with pytest.raises(TraceFormatError, match=r"cut_philly_trace\.csv\.gz.*corrupt or truncated gzip"):
        read_philly_rfold(path)


def test_duplicate_job_ids_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "dup_philly_trace.csv"
    path.write_text(RFOLD_HEADER + "a,0,CLOS,1,1,100\nb,10,CLOS,1,1,100\na,20,CLOS,1,1,100\n")
    with pytest.raises(TraceFormatError, match=r"dup_philly_trace\.csv.*row 2.*job_id.*repeats an earlier job's id 'a' \(first at row 0\)"):
        read_philly_rfold(path)
    # both rows named: the repeat's and the first occurrence's, not the first repeated id's neighbour
    path.write_text(RFOLD_HEADER + "a,0,CLOS,1,1,100\nb,10,CLOS,1,1,100\nc,15,CLOS,1,1,100\n"
                    "b,20,CLOS,1,1,100\na,30,CLOS,1,1,100\n")
    with pytest.raises(TraceFormatError, match=r"row 3.*repeats an earlier job's id 'b' \(first at row 1\)"):
        read_philly_rfold(path)
