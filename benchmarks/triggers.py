"""What the retraining triggers cost: the check after every actual, and the on-demand check.

Run: ``.venv/bin/python benchmarks/triggers.py [--actuals 10000] [--calls 200]
[--write docs/results.md]``

Setup (not timed): the home of ``benchmarks/api.py`` (the example workspace ingested, the
manual baseline registered and active), then ``--actuals`` predictions of real runs from their
real features, each followed by its real duration (``Service.report_actual``), so
``HOME/actuals.jsonl`` and ``HOME/served.jsonl`` hold that many lines.

Timed, ``--calls`` times each (medians and 95th percentiles):

- ``Service.report_actual`` as ``POST /v1/actuals`` runs it, with the trigger check and with the
  check replaced by nothing (the difference is what the check adds to every actual);
- ``triggers.after_actuals`` alone;
- ``triggers.check_triggers`` (``autofe triggers check``: degradation, drift, and skew, with
  500 more served lines of real warehouse runs, so every feature of the served model is
  computed on the warehouse and paired with them), 5 calls.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

from api import _home as build_home
from dashboard import report_actuals
from report import commit, machine, percentile, run_and_write

from autofe.featurespec import FeatureSpec
from autofe.pipelines import triggers
from autofe.pipelines.nightly import feature_values, read_labelled
from autofe.pipelines.serve import create_app
from autofe.pipelines.serve_models import ActualReport
from autofe.pipelines.serve_routes import service_of
from autofe.pipelines.serve_service import Service
from autofe.pipelines.served_log import Served, ServedLog


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--actuals", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--write", type=Path)
    run_and_write("triggers", parser.parse_args(), run)


def run(tmp: Path, args: argparse.Namespace) -> str:
    home = build_home(tmp)
    service = service_of(create_app(home, token="", poll_s=1.0))
    loaded = service.live.current()
    assert loaded is not None
    report_actuals(service, loaded, home / "warehouse.duckdb", args.actuals)
    serve_real_runs(home, loaded.version, loaded.artifact.specs, 500)
    with_check = timed(lambda: report(service), args.calls)
    service.check_triggers = lambda: None  # type: ignore[method-assign]
    without = timed(lambda: report(service), args.calls)
    alone = timed(lambda: triggers.after_actuals(home), args.calls)
    on_demand = timed(lambda: triggers.check_triggers(home), 5)
    rows = [
        ("`report_actual` with the check", with_check),
        ("`report_actual` without it", without),
        ("`after_actuals` alone", alone),
        ("`check_triggers` (on demand, skew included), 5 calls", on_demand),
    ]
    lines = [
        f"Commit {commit()}. Machine: {machine()}. Command: `.venv/bin/python "
        f"benchmarks/triggers.py --actuals {args.actuals} --calls {args.calls}`.",
        "",
        f"Home: {args.actuals:,} actuals and {args.actuals + 500:,} served lines (500 of real "
        "warehouse runs), the manual baseline served.",
        "",
        "| call | median ms | p95 ms |",
        "|---|---|---|",
        *(f"| {name} | {percentile(t, 0.5):.2f} | {percentile(t, 0.95):.2f} |" for name, t in rows),
        "",
    ]
    return "\n".join(lines)


def serve_real_runs(home: Path, version: str, specs: tuple[FeatureSpec, ...], n: int) -> None:
    """``n`` served lines of real warehouse runs with their real values, so the on-demand
    check pairs them with the warehouse and computes every feature (the skew check's cost)."""
    db = home / "warehouse.duckdb"
    values = feature_values(db, specs)
    runs = [r[0] for r in read_labelled(db)][-n:]
    log = ServedLog(home / "served.jsonl")
    for i, run in enumerate(runs):
        features = {name: column.get(run) for name, column in values.items()}
        log.append(Served(time.time() + i, version, run, "", features))


def report(service: Service) -> None:
    body = {"run_id": "bench", "job_id": "101", "duration_s": 12.5}
    service.report_actual(ActualReport.model_validate(body))


def timed(call: Callable[[], object], n: int) -> list[float]:
    """Milliseconds of ``n`` calls after one warm-up."""
    call()
    found = []
    for _ in range(n):
        started = time.perf_counter()
        call()
        found.append((time.perf_counter() - started) * 1000.0)
    return found


if __name__ == "__main__":
    main()
