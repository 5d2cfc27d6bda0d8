"""A replay of the shipped example workspace through the prediction API, for the triggers.

The champion is the first night's model on the first :data:`FIRST` runs. The later runs are
then replayed in submit order: each is predicted through ``POST /v1/predict`` with the
features ``autofe serve`` would compute for it — against the home's warehouse as the last
night left it (the replayed runs placed in it as pending: no end, no duration, no event log),
so that history features are as stale as they are between nights — and its real duration is
reported through ``POST /v1/actuals``, which runs the triggers. An optional shift multiplies
one job's durations from one run on (a script change that made the job slower).
"""

from __future__ import annotations

import json
import shutil
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from autofe.config import IngestSettings
from autofe.featurespec import FeatureSpec
from autofe.ingest.ingest import ingest
from autofe.modeling.artifact import Artifact
from autofe.modeling.dataset import FeatureValues
from autofe.modeling.predict import predict_values
from autofe.pipelines.nightly import feature_values

FIRST = 300
"""Runs of the champion's first night (of 490, in start order)."""


@dataclass(frozen=True)
class Shift:
    """``job``'s runs from replay index ``start`` on take ``factor`` times as long."""

    job: str
    start: int
    factor: float = 3.0


def run_name(path: Path) -> str:
    return str(json.loads(path.read_text())["run_name"])


def copy_static(source: Path, dest: Path) -> None:
    for folder in ("jobs", "scripts", "table_stats"):
        shutil.copytree(source / folder, dest / folder, dirs_exist_ok=True)
    shutil.copy2(source / "node_types.json", dest)
    for folder in ("runs", "clusters", "cluster-logs"):
        (dest / folder).mkdir(parents=True, exist_ok=True)


def write_run(source: Path, dest: Path, run: Path, factor: float, pending: bool) -> None:
    """Copy one run (scaled by ``factor``), its cluster and, when finished, its event log."""
    data = json.loads(run.read_text())
    if factor != 1.0:
        added = round(data["execution_duration"] * (factor - 1.0))
        data["execution_duration"] += added
        data["run_duration"] = data.get("run_duration", 0) + added
        data["end_time"] += added
    if pending:
        data["state"] = {"life_cycle_state": "RUNNING", "state_message": ""}
        for key in ("end_time", "execution_duration", "run_duration", "cleanup_duration"):
            data.pop(key, None)
    (dest / "runs" / run.name).write_text(json.dumps(data))
    cluster = data["cluster_instance"]["cluster_id"]
    shutil.copy2(source / "clusters" / f"{cluster}.json", dest / "clusters")
    if not pending:
        logs = source / "cluster-logs" / cluster
        shutil.copytree(logs, dest / "cluster-logs" / cluster, dirs_exist_ok=True)


def factor_of(runs: Sequence[Path], index: int, shift: Shift | None) -> float:
    shifted = shift is not None and index >= shift.start and run_name(runs[index]) == shift.job
    return shift.factor if shifted and shift is not None else 1.0


def workspace(
    source: Path,
    dest: Path,
    runs: Sequence[Path],
    finished: int,
    pending: int = 0,
    shift: Shift | None = None,
) -> Path:
    """The first ``finished`` runs as they ended, the next ``pending`` as still running."""
    copy_static(source, dest)
    for i in range(finished + pending):
        write_run(source, dest, runs[i], factor_of(runs, i, shift), pending=i >= finished)
    return dest


def served_features(
    source: Path,
    tmp: Path,
    runs: Sequence[Path],
    finished: int,
    specs: tuple[FeatureSpec, ...],
    shift: Shift | None,
) -> FeatureValues:
    """The features ``autofe serve`` computes for each later run, the warehouse as it was
    after the night that ingested the first ``finished`` runs (all later runs pending)."""
    folder = workspace(source, tmp / "ws", runs, finished, len(runs) - finished, shift)
    db = tmp / "serving.duckdb"
    ingest([folder], IngestSettings(db=db))
    return feature_values(db, specs)


def predict(
    client: TestClient, run_id: str, job_id: str, features: dict[str, Any]
) -> dict[str, Any]:
    body = {"run_id": run_id, "job_id": job_id, "features": features}
    response = client.post("/v1/predict", json=body)
    assert response.status_code == 200, response.text
    return dict(response.json())


def report(
    client: TestClient, run_id: str, job_id: str, duration_s: float, finished_at: str
) -> dict[str, Any]:
    body = {
        "run_id": run_id,
        "job_id": job_id,
        "duration_s": duration_s,
        "finished_at": finished_at,
    }
    response = client.post("/v1/actuals", json=body)
    assert response.status_code == 201, response.text
    return dict(response.json())


def finished_at(run: dict[str, Any], factor: float) -> str:
    """The run's end (RFC 3339), later by the shift's extra execution time."""
    end = run["end_time"] + run["execution_duration"] * (factor - 1.0)
    return datetime.fromtimestamp(end / 1000.0, UTC).isoformat(timespec="seconds")


def version_errors(
    artifact: Artifact,
    values: FeatureValues,
    runs: Sequence[Path],
    indices: Sequence[int],
    shift: Shift | None,
) -> list[float]:
    """A model's absolute percentage errors on the runs at ``indices``, from ``values``."""
    errors = []
    for i in indices:
        run = json.loads(runs[i].read_text())
        run_id = str(run["run_id"])
        one = {name: by_run.get(run_id) for name, by_run in values.items()}
        p50 = predict_values(artifact, one, run_id, str(run["job_id"])).p50_s
        seconds = run["execution_duration"] * factor_of(runs, i, shift) / 1000.0
        errors.append(abs(p50 - seconds) / seconds)
    return errors


def baseline_errors(
    runs: Sequence[Path], indices: Sequence[int], shift: Shift | None
) -> dict[str, list[float]]:
    """The simple baselines' errors on the runs at ``indices``: the median of the job's
    earlier runs that finished before it started, all of them and the last five (the
    lookup tables a model must beat, with the shift's durations as they were observed); a
    job with no such run gets the median of every earlier finished run."""
    data = [json.loads(run.read_text()) for run in runs]
    found: dict[str, list[float]] = {"job median": [], "job last-5 median": []}
    for i in indices:
        seconds = data[i]["execution_duration"] * factor_of(runs, i, shift) / 1000.0
        finished = [
            (data[k]["job_id"], data[k]["execution_duration"] * factor_of(runs, k, shift) / 1e3)
            for k in range(i)
            if data[k]["state"].get("result_state") == "SUCCESS"
            and data[k]["end_time"] <= data[i]["start_time"]
        ]
        mine = [d for job, d in finished if job == data[i]["job_id"]] or [d for _, d in finished]
        for name, history in (("job median", mine), ("job last-5 median", mine[-5:])):
            found[name].append(abs(statistics.median(history) - seconds) / seconds)
    return found


def top_numeric_feature(artifact: Artifact, values: FeatureValues) -> str:
    """The model's feature with the largest gain share among those with numeric values."""
    from autofe.modeling.importance import gain_shares

    gain = gain_shares(artifact.model)

    def numeric(name: str) -> bool:
        found = values[name].values()
        return any(isinstance(v, int | float) and not isinstance(v, bool) for v in found)

    names = [name for name in artifact.model.features if numeric(name)]
    return max(names, key=lambda name: gain.get(name, 0.0))


def shipped_baselines(
    source: Path, tmp: Path, runs: Sequence[Path], shift: Shift | None, scored: Sequence[int]
) -> dict[str, list[float]]:
    """The product's baselines (:mod:`autofe.modeling.baselines`: job and job x configuration
    medians, the last 5 runs' median, raw-column LightGBM with and without node facts, the
    Ernest-style fit) on the runs at ``scored``, fit on every labelled run before the first
    of them, with the shift's durations as they were observed."""
    from autofe.modeling.baselines import FACTS_SQL, as_facts, score_baselines
    from autofe.sandbox.session import Sandbox

    folder = workspace(source, tmp / "ws", runs, len(runs), shift=shift)
    db = tmp / "all.duckdb"
    ingest([folder], IngestSettings(db=db))
    with Sandbox.open(db) as sandbox:
        facts = as_facts(sandbox.query(FACTS_SQL).rows)
    wanted = [str(json.loads(runs[i].read_text())["run_id"]) for i in scored]
    position = {fact.run_id: k for k, fact in enumerate(facts)}
    cut = min(position[run] for run in wanted)
    found: dict[str, list[float]] = {}
    for baseline in score_baselines(facts, cut):
        errors = []
        for run in wanted:
            actual, predicted = (
                facts[position[run]].seconds,
                baseline.predicted[position[run] - cut],
            )
            errors.append(abs(float(predicted) - actual) / actual)
        found[baseline.label] = errors
    return found
