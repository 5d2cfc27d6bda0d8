"""``HOME/served.jsonl``: how big a line is, what writing it adds to a prediction, tail reads.

Run: ``.venv/bin/python benchmarks/served_log.py [--calls 3000] [--big-mb 500]
[--write docs/results.md]``

Setup (not timed): the shipped example workspace ingested into ``HOME/warehouse.duckdb``, the
manual baseline trained, registered and promoted, one prediction of the latest run's job spec
(features computed) and its feature values. Measured:

- the bytes of a line, features computed and given;
- ``Service.predict`` with the features given (what ``POST /v1/predict`` runs), ``--calls``
  times after 200 warm-up calls, with the line appended and with ``ServedLog.append`` replaced
  by a no-op, in three alternating rounds (the round with the lowest median of each is
  reported); and ``ServedLog.append`` alone;
- ``read_served_tail(path, 500)`` (what the skew check reads after each night) on files of 10 MB
  and ``--big-mb`` MB of real lines, against counting every line of the big one
  (``serve_ui_actuals.tail_lines``, what the dashboard does for ``actuals.jsonl``).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from api import _home, _latest_specs, _repeat
from report import commit, machine, percentile, run_and_write

from autofe.pipelines.serve_models import PredictRequest
from autofe.pipelines.serve_service import Service
from autofe.pipelines.serve_ui_actuals import tail_lines
from autofe.pipelines.served_log import Served, read_served_tail

TAIL = 500


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000, help="in-process predictions")
    parser.add_argument("--big-mb", type=int, default=500, help="size of the long file")
    parser.add_argument("--write", type=Path)
    run_and_write("served_log", parser.parse_args(), lambda tmp, a: run(tmp, a.calls, a.big_mb))


def run(tmp: Path, calls: int, big_mb: int) -> str:
    home = _home(tmp)
    service = Service(home)
    loaded = service.live.current()
    assert loaded is not None
    spec = _latest_specs(home / "warehouse.duckdb", 1)[0]
    spec.pop("source_run")
    computed = service.predict(loaded, PredictRequest.model_validate(spec))
    given = PredictRequest(job_id=computed.job_id, features=computed.features)
    service.predict(loaded, given)
    computed_line, given_line = (home / "served.jsonl").read_bytes().splitlines(keepends=True)
    with_log, without_log = _interleaved(service, lambda: service.predict(loaded, given), calls)
    served = Served(time.time(), loaded.version, None, given.job_id, computed.features)
    alone = _repeat(lambda: service.served.append(served), calls)
    rows = [
        f"- a line: {len(computed_line)} bytes with {len(computed.features)} features computed, "
        f"{len(given_line)} given",
        _row("predict, features given, line appended", with_log),
        _row("predict, features given, no line", without_log),
        _row("ServedLog.append alone", alone),
        *_tails(tmp, given_line, big_mb),
    ]
    command = f".venv/bin/python benchmarks/served_log.py --calls {calls} --big-mb {big_mb}"
    head = f"Commit {commit()}. Machine: {machine()}. Command: `{command}`."
    return f"{head}\n\n" + "\n".join(rows) + "\n"


def _interleaved(
    service: Service, predict: Callable[[], object], calls: int, rounds: int = 3
) -> tuple[list[float], list[float]]:
    """Predictions with the line appended and without, in alternating rounds (a machine
    shared with other work slows both alike); each side's round with the lowest median."""
    append = service.served.append
    with_log, without_log = [], []
    for _ in range(rounds):
        with_log.append(_repeat(predict, calls))
        service.served.append = lambda served: None  # type: ignore[method-assign]
        without_log.append(_repeat(predict, calls))
        service.served.append = append  # type: ignore[method-assign]
    return min(with_log, key=statistics.median), min(without_log, key=statistics.median)


def _tails(tmp: Path, line: bytes, big_mb: int) -> list[str]:
    rows = []
    for mb in (10, big_mb):
        path = tmp / f"served-{mb}.jsonl"
        with path.open("wb") as handle:
            block = line * 10_000
            for _ in range(max(1, mb * 10**6 // len(block))):
                handle.write(block)
        size = path.stat().st_size / 1e6
        tail = _timed(path, read_served_tail)
        rows.append(_row(f"read_served_tail({TAIL}), {size:.0f} MB", tail))
        if mb == big_mb:
            counted = _timed(path, tail_lines)
            rows.append(_row(f"tail_lines({TAIL}) counting every line, {size:.0f} MB", counted))
        path.unlink()
    return rows


def _timed(path: Path, read: Callable[[Path, int], object], n: int = 10) -> list[float]:
    read(path, TAIL)
    times = []
    for _ in range(n):
        started = time.perf_counter()
        read(path, TAIL)
        times.append((time.perf_counter() - started) * 1000)
    return times


def _row(name: str, times: list[float]) -> str:
    median, p99 = statistics.median(times), percentile(times, 0.99)
    return f"- {name}: median {median:.3f} ms, p99 {p99:.3f} ms ({len(times)} calls)"


if __name__ == "__main__":
    main()
