"""The transferable-history recipes against values computed by hand on a tiny warehouse.

Job ``j1`` ran on four cluster sizes (P = 2, 8, 16, 32: one worker, two workers, zero workers
and an autoscaling cluster), with a failed run and a run still going at the targets' submission
that no feature may read. The Ernest fit is checked against scipy's NNLS on the same rows.

The per-job scaling fit gets a warehouse of its own (table statistics give each run a size, the
clusters' masters its slots), checked against a ridge fit solved by numpy.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import numpy as np
import pytest
from scipy.optimize import nnls  # type: ignore[import-untyped]

from autofe.knowledge_base.corpus import load_corpus, recipe_spec
from autofe.sandbox.session import Sandbox
from autofe.warehouse.connect import open_warehouse
from autofe.warehouse.write import insert_rows

DOC = next(d for d in load_corpus() if d.id == "transferable-history")
T0 = datetime(2024, 1, 1)
CONFIGS = [
    {"config_id": "c2", "vcpu_per_node": 2.0, "memory_gb_per_node": 4.0, "num_workers": 1},
    {"config_id": "c8", "vcpu_per_node": 4.0, "memory_gb_per_node": 16.0, "num_workers": 2},
    {"config_id": "c16", "vcpu_per_node": 16.0, "memory_gb_per_node": 64.0, "num_workers": 0},
    {"config_id": "c32", "vcpu_per_node": 4.0, "memory_gb_per_node": 8.0, "autoscale_max": 8},
]
P = {"c2": 2.0, "c8": 8.0, "c16": 16.0, "c32": 32.0}
HISTORY = [  # (run, job, config, duration, status, script): the j1 history, one hour apart
    ("h1", "j1", "c2", 260.0, "SUCCEEDED", None),
    ("h2", "j1", "c8", 95.0, "SUCCEEDED", None),
    ("h3", "j1", "c2", 240.0, "SUCCEEDED", "v2"),
    ("h4", "j1", "c16", 70.0, "SUCCEEDED", "v2"),
    ("h5", "j1", "c8", 30.0, "FAILED", "v2"),
    ("h6", "j1", "c32", 120.0, "SUCCEEDED", "v2"),
    ("h7", "j1", "c8", 88.0, "SUCCEEDED", "v2"),
    ("k1", "j2", "c2", 50.0, "SUCCEEDED", None),
    ("k2", "j2", "c8", 20.0, "SUCCEEDED", None),
    ("m1", "j3", "c8", 10.0, "SUCCEEDED", None),
    ("m2", "j3", "c8", 11.0, "SUCCEEDED", None),
    ("m3", "j3", "c8", 12.0, "SUCCEEDED", None),
]
TARGETS = [("t8", "j1", "c8"), ("t16", "j1", "c16"), ("u2", "j2", "c2"), ("u8", "j3", "c8")]
SUBMIT = T0 + timedelta(hours=len(HISTORY) + 1)


def _run(run_id: str, job: str, config: str, submit: datetime, seconds: float) -> dict[str, Any]:
    end = submit + timedelta(seconds=seconds)
    return {"run_id": run_id, "job_id": job, "cluster_config_id": config,
            "submit_time": submit, "start_time": submit, "end_time": end,
            "duration_s": seconds, "source": "test"}  # fmt: skip


@pytest.fixture(scope="module")
def values(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    db = tmp_path_factory.mktemp("transfer") / "w.duckdb"
    runs = []
    for i, (run_id, job, config, seconds, status, script) in enumerate(HISTORY):
        row = _run(run_id, job, config, T0 + timedelta(hours=i), seconds)
        runs.append({**row, "status": status, "script_text": script})
    # still running when the targets are submitted: long, and on a size of its own
    runs.append({**_run("late", "j1", "c2", SUBMIT - timedelta(minutes=5), 9000.0),
                 "status": "SUCCEEDED"})  # fmt: skip
    for run_id, job, config in TARGETS:
        runs.append({**_run(run_id, job, config, SUBMIT, 1.0), "status": "SUCCEEDED",
                     "script_text": "v2" if job == "j1" else None})  # fmt: skip
    con = open_warehouse(db)
    insert_rows(con, "cluster_configs", [{**c, "source": "test"} for c in CONFIGS])
    jobs = [
        {"job_id": j, "name": j, "script_text": "v1", "source": "test"} for j in ("j1", "j2", "j3")
    ]
    insert_rows(con, "jobs", jobs)
    insert_rows(con, "runs", runs)
    insert_rows(con, "stages", [
        {"app_key": f"a-{run}", "run_id": run, "stage_id": k, "attempt_id": 0, "input_bytes": b}
        for run, k, b in (("h1", 0, 600), ("h1", 1, 400), ("h2", 0, 3000), ("late", 0, 10**9))
    ])  # fmt: skip
    con.close()
    with Sandbox.open(db) as sandbox:
        return {r.name: dict(sandbox.query(recipe_spec(DOC, r).sql).rows) for r in DOC.recipes}


def _j1_history() -> tuple[np.ndarray, np.ndarray]:
    """The rows an Ernest fit for j1's targets may use: successful, ended before submission."""
    rows = [(P[c], s) for _, j, c, s, st, _ in HISTORY if j == "j1" and st == "SUCCEEDED"]
    p, seconds = np.array(rows).T
    return p, seconds


def _ernest_by_hand(p_target: float) -> float:
    p, y = _j1_history()
    terms = np.column_stack([np.ones_like(p), 1 / p, np.log(p), p])
    coef, _ = nnls(terms / y[:, None], np.ones(len(y)))
    assert 0 < np.count_nonzero(coef) < 4  # the bounds bind: a real NNLS, not plain least squares
    return float(coef @ [1.0, 1 / p_target, np.log(p_target), p_target])


@pytest.mark.parametrize(("run_id", "cores"), [("t8", 8.0), ("t16", 16.0)])
def test_ernest_fit_matches_scipy_nnls(
    values: dict[str, dict[str, Any]], run_id: str, cores: float
) -> None:
    assert values["ernest_job_fit_s"][run_id] == pytest.approx(_ernest_by_hand(cores), rel=1e-6)


def test_ernest_fit_needs_three_runs_on_two_sizes(values: dict[str, dict[str, Any]]) -> None:
    fit = values["ernest_job_fit_s"]
    assert fit["u2"] is None  # two earlier runs
    assert fit["u8"] is None  # three on one size
    assert fit["h3"] is None and fit["h4"] is not None  # h4 sees h1-h3 on sizes 2 and 8


def test_medians_read_only_finished_successful_runs(values: dict[str, dict[str, Any]]) -> None:
    assert values["history_job_config_median_s"]["t8"] == pytest.approx(np.median([95.0, 88.0]))
    assert values["history_job_config_median_s"]["t16"] == 70.0
    assert values["history_job_config_median_s"]["h1"] is None  # no earlier run at all
    # h4 is j1's first run on c16: the median of its earlier runs on any configuration
    assert values["history_job_config_median_s"]["h4"] == pytest.approx(np.median([260.0, 95, 240]))
    assert values["history_job_config_runs"]["h4"] == 0.0
    assert values["history_job_config_runs"]["t8"] == 2.0  # h2, h7; not h5 (failed)
    # v2 ran as h3, h4, h6, h7 (h5 failed); the job's own script v1 as h1, h2
    assert values["history_job_script_median_s"]["t8"] == pytest.approx(
        np.median([240.0, 70.0, 120.0, 88.0])
    )
    assert values["history_job_script_median_s"]["h3"] is None


def test_core_seconds_and_hardware_are_rescaled_to_the_run(
    values: dict[str, dict[str, Any]],
) -> None:
    p, y = _j1_history()
    for run_id, cores in (("t8", 8.0), ("t16", 16.0)):
        expected = float(np.median(p * y)) / cores
        assert values["history_core_seconds_rescaled_s"][run_id] == pytest.approx(expected)
    # h1 read 1000 bytes and h2 3000 (the late run's 1e9 is not known yet)
    assert values["history_input_bytes_per_core_rescaled"]["t16"] == pytest.approx(2000.0 / 16)
    assert values["history_input_bytes_per_core_rescaled"]["h2"] == pytest.approx(1000.0 / 8)
    configs = {h[0]: h[2] for h in HISTORY} | {"late": "c2"} | {t[0]: t[2] for t in TARGETS}
    assert values["cluster_total_cores"] == {run: P[c] for run, c in configs.items()}
    assert values["cluster_total_memory_gb"]["t16"] == 64.0
    assert values["cluster_total_memory_gb"]["t8"] == 32.0


# ---------------------------------------------------------------- history_job_scaling_s

SCALING = next(r for r in DOC.recipes if r.name == "history_job_scaling_s")
# slots by cores_task_slots: N for local[N], else vCPU x workers, else unknown
SLOT_CONFIGS: list[dict[str, Any]] = [
    {"config_id": "l1", "vcpu_per_node": 4.0, "num_workers": 0,
     "spark_conf": '{"spark.master": "local[1]"}'},
    {"config_id": "l4", "vcpu_per_node": 8.0, "num_workers": 0,
     "spark_conf": '{"spark.master": "local[4]"}'},
    {"config_id": "w6", "vcpu_per_node": 2.0, "num_workers": 3, "spark_conf": "{}"},
    {"config_id": "nx", "spark_conf": "{}"},
    # the same slots on other configurations (another driver memory, say): a target there has
    # no earlier run on its own configuration, so it gets the fit, not a median
    {"config_id": "l1b", "vcpu_per_node": 4.0, "num_workers": 0,
     "spark_conf": '{"spark.master": "local[1]", "spark.driver.memory": "2g"}'},
    {"config_id": "l4b", "vcpu_per_node": 8.0, "num_workers": 0,
     "spark_conf": '{"spark.master": "local[4]", "spark.driver.memory": "2g"}'},
    {"config_id": "w6b", "vcpu_per_node": 2.0, "num_workers": 3, "spark_conf": '{"a": "b"}'},
    {"config_id": "nxb"},
]  # fmt: skip
SLOTS = {"l1": 1.0, "l4": 4.0, "w6": 6.0, "nx": None, "l1b": 1.0, "l4b": 4.0, "w6b": 6.0}
SALES, STAGING, DIM = "SELECT * FROM sales", "SELECT * FROM staging", "SELECT * FROM dim"
Scaled = tuple[str, str, str, str, float | None, float, str]
"""(run, job, config, script, sales bytes at submit, duration, status)"""
SCALED: list[Scaled] = [  # an hour apart
    ("j1", "j", "l1", SALES, 1e9, 100.0, "SUCCEEDED"),
    ("j2", "j", "l4", SALES, 1e9, 40.0, "SUCCEEDED"),
    ("j3", "j", "w6", SALES, 2e9, 55.0, "SUCCEEDED"),
    ("j4", "j", "l1b", SALES, 4e9, 330.0, "SUCCEEDED"),
    ("j5", "j", "nx", SALES, 3e9, 120.0, "SUCCEEDED"),  # slots unknown
    ("j6", "j", "l4", SALES, 2e9, 9.0, "FAILED"),
    ("j7", "j", "w6", STAGING, None, 70.0, "SUCCEEDED"),  # no statistics: size unknown
    ("s1", "s", "l4", "SELECT 1", None, 42.0, "SUCCEEDED"),
    ("f1", "f", "l4", DIM, None, 10.0, "SUCCEEDED"),
    ("f2", "f", "l4", DIM, None, 20.0, "SUCCEEDED"),
    ("f3", "f", "l4", DIM, None, 40.0, "SUCCEEDED"),
]
DIM_BYTES = 5e8  # one snapshot, before every run: f's size never varies
SCALING_TARGETS = [  # (run, job, config, script); submitted together, the sales table at 8e9
    ("ta", "j", "l4b", SALES),
    ("tb", "j", "nxb", SALES),
    ("tc", "j", "w6b", STAGING),
    ("td", "j", "w6", SALES),  # j3 and j7 ran on w6: their median, whatever the size
    ("st", "s", "l1", "SELECT 1"),
    ("nt", "n", "l4", SALES),
    ("fa", "f", "l4", DIM),
    ("fb", "f", "l1", DIM),
]
TARGET_BYTES = 8e9
SCALING_SUBMIT = T0 + timedelta(hours=len(SCALED) + 1)
LATE: Scaled = ("late", "j", "l1", SALES, 1e11, 9000.0, "SUCCEEDED")  # still running at the targets


@pytest.fixture(scope="module")
def scaling(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    db = tmp_path_factory.mktemp("scaling") / "w.duckdb"
    late_submit = SCALING_SUBMIT - timedelta(minutes=5)
    submits = {r[0]: T0 + timedelta(hours=i) for i, r in enumerate(SCALED)} | {"late": late_submit}
    runs, stats = [], [_stats("dim", T0 - timedelta(days=1), DIM_BYTES)]
    for run_id, job, config, script, size, seconds, status in [*SCALED, LATE]:
        runs.append({**_run(run_id, job, config, submits[run_id], seconds), "status": status,
                     "script_text": script})  # fmt: skip
        if size is not None:
            stats.append(_stats("sales", submits[run_id] - timedelta(minutes=1), size))
    stats.append(_stats("sales", SCALING_SUBMIT - timedelta(minutes=1), TARGET_BYTES))
    for run_id, job, config, script in SCALING_TARGETS:
        runs.append({**_run(run_id, job, config, SCALING_SUBMIT, 1.0), "status": "SUCCEEDED",
                     "script_text": script})  # fmt: skip
    con = open_warehouse(db)
    insert_rows(con, "cluster_configs", [{**c, "source": "test"} for c in SLOT_CONFIGS])
    insert_rows(con, "jobs", [{"job_id": j, "name": j, "source": "test"} for j in "jsnf"])
    insert_rows(con, "runs", runs)
    insert_rows(con, "table_stats", stats)
    con.close()
    with Sandbox.open(db) as sandbox:
        return dict(sandbox.query(recipe_spec(DOC, SCALING).sql).rows)


def _stats(table: str, as_of: datetime, size: float) -> dict[str, Any]:
    return {"table_name": table, "as_of": as_of, "bytes": int(size), "source": "test"}


def _size(run: Scaled) -> float | None:
    return DIM_BYTES if run[3] == DIM else run[4]


def _ridge_by_hand(history: list[Scaled], size: float | None, slots: float | None) -> float:
    """ln duration on centred ln size and ln slots, ridge 1 on the slopes, solved by numpy; an
    unknown x is the mean of the known ones (a deviation of 0)."""
    y = np.log([r[5] for r in history])
    rows, target = [], []
    sizes, slot_counts = [_size(r) for r in history], [SLOTS[r[2]] for r in history]
    for column, at in ((sizes, size), (slot_counts, slots)):
        x = np.array([np.log(v) if v else np.nan for v in column])
        mean = np.nanmean(x) if np.isfinite(x).any() else 0.0
        rows.append(np.nan_to_num(x - mean))
        target.append(np.log(at) - mean if at else 0.0)
    a = np.column_stack(rows)
    slopes = np.linalg.solve(a.T @ a + np.eye(2), a.T @ (y - y.mean()))
    return float(np.exp(y.mean() + slopes @ target))


def _finished(job: str) -> list[Scaled]:
    return [r for r in SCALED if r[1] == job and r[6] == "SUCCEEDED"]


@pytest.mark.parametrize(
    ("run_id", "size", "slots"),
    [("ta", TARGET_BYTES, 4.0), ("tb", TARGET_BYTES, None), ("tc", None, 6.0)],
)
def test_job_scaling_is_the_ridge_fit_on_earlier_runs(
    scaling: dict[str, Any], run_id: str, size: float | None, slots: float | None
) -> None:
    expected = _ridge_by_hand(_finished("j"), size, slots)
    assert scaling[run_id] == pytest.approx(expected, rel=1e-9)
    # the late run (1e11 bytes on 1 slot, 9000 s) ended after the targets' submission
    assert abs(_ridge_by_hand([*_finished("j"), LATE], size, slots) / expected - 1) > 0.05


def test_job_scaling_reads_only_finished_runs(scaling: dict[str, Any]) -> None:
    assert scaling["nt"] is None and scaling["j1"] is None  # no earlier run
    assert scaling["st"] == pytest.approx(42.0)  # one earlier run: its duration
    assert scaling["j2"] == pytest.approx(100.0)  # j1 only
    # j4 sees j1-j3: a real fit on both terms
    assert scaling["j4"] == pytest.approx(_ridge_by_hand(_finished("j")[:3], 4e9, 1.0))


def test_job_scaling_on_a_configuration_the_job_ran_on_is_its_median_there(
    scaling: dict[str, Any],
) -> None:
    assert scaling["td"] == pytest.approx(np.median([55.0, 70.0]))
    assert scaling["fa"] == pytest.approx(20.0)  # f1-f3 on l4
    assert scaling["j5"] != pytest.approx(np.median([100.0]))  # j5 is the first on nx: a fit


def test_job_scaling_without_variation_is_the_geometric_mean(scaling: dict[str, Any]) -> None:
    """f always read the same bytes on the same slots: both slopes are 0, whatever the
    target's slots (fb is the first of f on l1)."""
    geometric = float(np.exp(np.mean(np.log([10.0, 20.0, 40.0]))))
    assert scaling["fb"] == pytest.approx(geometric)
