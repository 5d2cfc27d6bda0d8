"""Predictions from a saved model: an existing run, and the same run described before submit."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

from autofe.errors import ConfigError
from autofe.modeling.artifact import Artifact, load_model
from autofe.modeling.pending import PendingRun, read_pending
from autofe.modeling.predict import predict_pending, predict_run, predict_values
from autofe.warehouse.connect import schema_fingerprint


@pytest.fixture(scope="module")
def artifact(manual_model: Path) -> Artifact:
    return load_model(manual_model, schema_fingerprint())


def _latest_run(db: Path) -> dict[str, Any]:
    """The last successful run with history behind it, as a pending-run description."""
    with duckdb.connect(str(db), read_only=True) as con:
        run_id, job_id, submit, config, params, script = con.execute(
            "SELECT run_id, job_id, submit_time, cluster_config_id, parameters, script_text "
            "FROM runs WHERE status = 'SUCCEEDED' ORDER BY submit_time DESC, run_id LIMIT 1"
        ).fetchone()  # type: ignore[misc]
        attrs = con.execute(
            "SELECT name, coalesce(CAST(value AS VARCHAR), value_text), value IS NOT NULL "
            "FROM run_attributes WHERE run_id = ? AND availability = 'known_at_submit'",
            [run_id],
        ).fetchall()
    return {
        "source_run": run_id,
        "job_id": job_id,
        "submit_time": submit.isoformat(),
        "cluster_config_id": config,
        "parameters": json.loads(params) if params else {},
        "script_text": script,
        "attributes": {n: float(v) if numeric else v for n, v, numeric in attrs},
    }


def test_a_run_described_before_submit_is_predicted_as_the_run_itself(
    artifact: Artifact, example_warehouse: Path
) -> None:
    known = _latest_run(example_warehouse)
    source = known.pop("source_run")
    as_run = predict_run(artifact, example_warehouse, source)
    as_pending = predict_pending(artifact, example_warehouse, PendingRun(**known))
    assert as_pending.features == as_run.features
    assert as_pending.p50_s == pytest.approx(as_run.p50_s, rel=1e-12)
    assert as_pending.intervals == as_run.intervals


def test_intervals_nest_around_the_median(artifact: Artifact, example_warehouse: Path) -> None:
    source = _latest_run(example_warehouse)["source_run"]
    p = predict_run(artifact, example_warehouse, source)
    (lo80, hi80), (lo90, hi90) = p.intervals[0.8], p.intervals[0.9]
    assert lo90 <= lo80 < p.p50_s < hi80 <= hi90
    assert p.as_dict()["intervals"] == {
        "80%": [round(lo80, 3), round(hi80, 3)],
        "90%": [round(lo90, 3), round(hi90, 3)],
    }


def test_a_new_configuration_changes_the_configuration_features(
    artifact: Artifact, example_warehouse: Path
) -> None:
    known = _latest_run(example_warehouse)
    known.pop("source_run")
    known.pop("cluster_config_id")
    cluster = {
        "node_type": "Standard_F4s",
        "vcpu_per_node": 4.0,
        "memory_gb_per_node": 8.0,
        "num_workers": 0,
        "spot_policy": "on_demand",
        "spark_conf": {
            "spark.master": "local[1]",
            "spark.driver.memory": "1g",
            "spark.sql.shuffle.partitions": "64",
        },
    }
    p = predict_pending(artifact, example_warehouse, PendingRun(**known, cluster=cluster))
    assert p.features["cfg_local_cores"] == 1
    assert p.features["cfg_shuffle_partitions"] == 64
    assert p.features["cfg_vcpus"] == 4.0


def test_the_warehouse_file_is_only_read(artifact: Artifact, example_warehouse: Path) -> None:
    before = hashlib.sha256(example_warehouse.read_bytes()).hexdigest()
    known = _latest_run(example_warehouse)
    known.pop("source_run")
    predict_pending(artifact, example_warehouse, PendingRun(**known))
    assert hashlib.sha256(example_warehouse.read_bytes()).hexdigest() == before


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"run_id": "1001"}, "run id '1001' is already in the warehouse"),
        ({"job_id": "no-such-job"}, "job 'no-such-job' is not in the warehouse"),
        ({"cluster_config_id": "no-such-config"}, "'no-such-config' is not in the warehouse"),
        ({"attributes": {"tag.lab_scale_factor": "x", "n": 1}}, None),
    ],
)
def test_a_pending_run_that_contradicts_the_warehouse_is_refused(
    artifact: Artifact, example_warehouse: Path, change: dict[str, Any], message: str | None
) -> None:
    known = _latest_run(example_warehouse)
    known.pop("source_run")
    pending = PendingRun(**{**known, **change})
    if message is None:  # a text attribute where numbers were seen is the model's missing value
        p = predict_pending(artifact, example_warehouse, pending)
        assert p.p50_s > 0
        return
    with pytest.raises(ConfigError, match=message):
        predict_pending(artifact, example_warehouse, pending)


def test_an_unknown_run_id_is_a_clear_error(artifact: Artifact, example_warehouse: Path) -> None:
    with pytest.raises(ConfigError, match="run 'nope' is not in the warehouse"):
        predict_run(artifact, example_warehouse, "nope")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "Invalid JSON"),
        ('{"submit_time": "2024-03-01T00:00:00"}', "job_id: Field required"),
        ('{"job_id": "1", "submit_time": "soon"}', "submit_time"),
        (
            '{"job_id": "1", "submit_time": "2024-03-01T00:00:00", "cluster": {"gpus": 2}}',
            "unknown cluster fields \\['gpus'\\]",
        ),
        ('{"job_id": "1", "submit_time": "2024-03-01T00:00:00", "colour": "red"}', "colour"),
    ],
)
def test_a_bad_job_file_names_the_file_and_the_field(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "job.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match=f"--job {path}.*{message}"):
        read_pending(path)


def test_submit_times_with_a_zone_become_utc() -> None:
    p = PendingRun(job_id="1", submit_time="2024-03-01T12:00:00+02:00")  # type: ignore[arg-type]
    assert p.submit_time.isoformat() == "2024-03-01T10:00:00"


def test_a_run_on_a_configuration_new_to_its_job_is_novel_and_says_so(
    artifact: Artifact, example_warehouse: Path
) -> None:
    known = _latest_run(example_warehouse)
    known.pop("source_run")
    rerun = predict_pending(artifact, example_warehouse, PendingRun(**known))
    known.pop("cluster_config_id")
    cluster = {"node_type": "Standard_F4s", "vcpu_per_node": 4.0, "memory_gb_per_node": 8.0}
    moved = predict_pending(artifact, example_warehouse, PendingRun(**known, cluster=cluster))
    assert rerun.novel is False and moved.novel is True
    assert rerun.as_dict()["novel"] is False and moved.as_dict()["novel"] is True
    # the same feature values, told apart only by their novelty: the novel calibration's width
    as_rerun = predict_values(artifact, moved.features, "x", moved.job_id, novel=False)
    as_novel = predict_values(artifact, moved.features, "x", moved.job_id, novel=True)
    assert as_novel.intervals == moved.intervals and as_novel.p50_s == as_rerun.p50_s
    (low_n, high_n), (low_r, high_r) = as_novel.intervals[0.8], as_rerun.intervals[0.8]
    assert high_n / low_n > high_r / low_r
