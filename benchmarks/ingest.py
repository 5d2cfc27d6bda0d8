"""Ingest throughput over the shared event-log corpus vs a naive baseline, in the same run.

Run: ``.venv/bin/python benchmarks/ingest.py [--repeat 3] [--write docs/results.md]``

Naive baseline: decompress each log (the same codec code) and ``json.loads`` every line,
counting events and TaskEnd events. autofe: the full ``ingest`` into a fresh warehouse file
(parse, aggregate, write), with 1 and with 2 parser processes. Counts must be identical.
"""

from __future__ import annotations

import argparse
import functools
import json
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from report import machine, write_section

from autofe.config import IngestSettings, external_data_dir
from autofe.ingest.eventlog.codecs import iter_decompressed
from autofe.ingest.eventlog.files import find_event_logs
from autofe.ingest.ingest import ingest


@dataclass(frozen=True)
class Result:
    name: str
    seconds: float
    megabytes: float
    events: int
    tasks: int

    def row(self, baseline: Result) -> str:
        return (
            f"| {self.name} | {self.seconds:.2f} | {self.megabytes / self.seconds:,.0f} | "
            f"{self.events / self.seconds:,.0f} | {self.events:,} | {self.tasks:,} | "
            f"{baseline.seconds / self.seconds:.2f}× |"
        )


def naive(corpus: Path) -> Result:
    """Decompress + json.loads per line: what a straightforward parser does."""
    started = time.perf_counter()
    size = events = tasks = 0
    for source in find_event_logs(corpus):
        for part in source.parts:
            data = b"".join(iter_decompressed(part))
            size += len(data)
            for line in data.split(b"\n"):
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if isinstance(event, dict) and "Event" in event:
                    events += 1
                    tasks += event["Event"] == "SparkListenerTaskEnd"
    return Result(
        "naive: decompress + json.loads", time.perf_counter() - started, size / 1e6, events, tasks
    )


def autofe_ingest(corpus: Path, workers: int) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        settings = IngestSettings(db=Path(tmp) / "bench.duckdb", workers=workers)
        started = time.perf_counter()
        report = ingest([corpus], settings)
        seconds = time.perf_counter() - started
    name = f"autofe ingest, {workers} process{'es' if workers > 1 else ''}"
    return Result(name, seconds, report.decompressed_bytes / 1e6, report.events, report.tasks)


def best_of(repeat: int, run: Callable[[], Result]) -> Result:
    return min((run() for _ in range(repeat)), key=lambda r: r.seconds)


def report_markdown(results: list[Result], repeat: int) -> str:
    base = results[0]
    lines = [
        f"Command: `.venv/bin/python benchmarks/ingest.py --repeat {repeat}` — best of {repeat}.",
        f"Machine: {machine()}.",
        "",
        "| pipeline | seconds | decompressed MB/s | events/s | events | TaskEnd | vs naive |",
        "|---|---|---|---|---|---|---|",
        *(r.row(base) for r in results),
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--write", type=Path, help="update this results file's ingest section")
    args = parser.parse_args()
    ext = external_data_dir()
    if ext is None:
        raise SystemExit("benchmarks/ingest.py needs ../shared/data/external beside the checkout")
    corpus = ext / "spark-eventlogs"
    results = [best_of(args.repeat, lambda: naive(corpus))]
    for workers in (1, 2):
        results.append(best_of(args.repeat, functools.partial(autofe_ingest, corpus, workers)))
    if len({(r.events, r.tasks) for r in results}) != 1:
        raise SystemExit(f"counts differ: {[(r.name, r.events, r.tasks) for r in results]}")
    body = report_markdown(results, args.repeat)
    print(body)
    if args.write:
        write_section(args.write, "ingest", body)


if __name__ == "__main__":
    main()
