"""Artifact load time and single-prediction latency, features computed and features given.

Run: ``.venv/bin/python benchmarks/predict.py [--n 200] [--write docs/results.md]``

Setup (not timed): the shipped example workspace ingested into a fresh warehouse, the manual
baseline (41 gated features) trained and saved. Timed: ``load_model`` (hash check, unpickle,
schema check), then ``--n`` predictions of the latest runs each way, after 10 warm-up calls:
- features given: ``predict_values`` from a dict of feature values (the model alone);
- features computed, run in the warehouse: ``predict_run`` (41 feature queries through the
  sandbox, restricted to the run);
- features computed, pending run: ``predict_pending`` (scratch copy of the tables the features
  read, the run inserted, then the same queries).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import duckdb
from report import machine, percentile, write_section

from autofe.config import IngestSettings, example_workspace
from autofe.evals.manual import manual_features
from autofe.ingest.ingest import ingest
from autofe.modeling.artifact import load_model
from autofe.modeling.pending import PendingRun
from autofe.modeling.predict import predict_pending, predict_run, predict_values
from autofe.pipelines.train import train_model
from autofe.warehouse.connect import schema_fingerprint

WARM_UP = 10


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--write", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        body = run(Path(tmp), args.n)
    print(body)
    if args.write:
        write_section(args.write, "predict", body)


def run(tmp: Path, n: int) -> str:
    db = tmp / "w.duckdb"
    ingest([example_workspace()], IngestSettings(db=db, workers=1))
    specs = manual_features()
    train_model(db, specs, tmp / "model")
    loads = [_timed(lambda: load_model(tmp / "model", schema_fingerprint())) for _ in range(20)]
    artifact = load_model(tmp / "model", schema_fingerprint())
    runs = _latest_runs(db, n)
    given = predict_run(artifact, db, runs[0][0]).features
    calls: dict[str, Callable[[int], object]] = {
        "features given (`predict_values`)": lambda i: predict_values(
            artifact, given, runs[i][0], runs[i][1]
        ),
        "features computed, run in the warehouse (`predict_run`)": lambda i: predict_run(
            artifact, db, runs[i][0]
        ),
        "features computed, pending run (`predict_pending`)": lambda i: predict_pending(
            artifact, db, _pending(runs[i])
        ),
    }
    rows = [_row(name, call, len(runs)) for name, call in calls.items()]
    size_kb = (tmp / "model" / "model.joblib").stat().st_size / 1024
    return (
        "\n".join(
            [
                f"Machine: {machine()}. Command: `.venv/bin/python benchmarks/predict.py --n {n}`.",
                "",
                f"- model: manual baseline, {len(specs)} features, "
                f"`model.joblib` {size_kb:.0f} KiB",
                f"- `load_model` (SHA-256 check, unpickle, schema check): p50 "
                f"{percentile(loads, 0.5):.1f} ms, max {max(loads):.1f} ms (20 loads)",
                "",
                "| single prediction | p50 ms | p95 ms | max ms |",
                "|---|---|---|---|",
                *rows,
            ]
        )
        + "\n"
    )


Run = tuple[str, str, object, str | None, str | None]


def _latest_runs(db: Path, n: int) -> list[Run]:
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute(
            "SELECT run_id, job_id, submit_time, cluster_config_id, CAST(parameters AS VARCHAR) "
            "FROM runs ORDER BY submit_time DESC LIMIT ?",
            [n],
        ).fetchall()
    return [(str(r), str(j), t, c, p) for r, j, t, c, p in rows]


def _pending(run: Run) -> PendingRun:
    _, job_id, submit, config, _ = run
    return PendingRun.model_validate(
        {"job_id": job_id, "submit_time": submit, "cluster_config_id": config, "run_id": "p"}
    )


def _timed(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


def _row(name: str, call: Callable[[int], object], n: int) -> str:
    for i in range(WARM_UP):
        call(i % n)
    times = [_timed(lambda i=i: call(i)) for i in range(n)]  # type: ignore[misc]
    p50, p95 = percentile(times, 0.5), percentile(times, 0.95)
    return f"| {name} | {p50:.1f} | {p95:.1f} | {max(times):.1f} |"


if __name__ == "__main__":
    main()
