"""How long ``autofe run`` takes on the shipped example with its defaults, and what it keeps.

Run: ``.venv/bin/python benchmarks/cycle.py [--repeat 1] [--burners 0] [--write docs/results.md]``

Each repetition is a fresh ``autofe run --out DIR`` subprocess into a fresh run folder (the
example ingested, the loop, the final fit, the report), timed from the outside. ``--burners N``
runs N CPU-bound processes (``while True: pass``) beside it, the loaded machine of the
determinism check: the wall time grows, the rounds, the catalog's hash and the holdout numbers
must not. The load average at the start is printed, since others may share the machine.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from report import commit, machine, run_and_write

AUTOFE = Path(sys.executable).with_name("autofe")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--burners", type=int, default=0)
    parser.add_argument("--write", type=Path)
    run_and_write("cycle", parser.parse_args(), run)


def run(tmp: Path, args: argparse.Namespace) -> str:
    rows = []
    for i in range(args.repeat):
        load = os.getloadavg()[0]
        with burning(args.burners):
            seconds, metrics, digest = one_run(tmp / f"run{i}")
        rows.append(row(load, seconds, metrics, digest))
    lines = [
        f"Commit {commit()}. Machine: {machine()}. Command: `.venv/bin/python "
        f"benchmarks/cycle.py --repeat {args.repeat} --burners {args.burners}`.",
        "",
        "| load avg at start | wall s | rounds | stop | partial | features | holdout MAPE "
        "| median APE | catalog sha256 |",
        "|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
    ]
    return "\n".join(lines)


def one_run(out: Path) -> tuple[float, dict[str, object], str]:
    """Wall seconds of one ``autofe run --out OUT``, its metrics, its catalog's sha256."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    started = time.perf_counter()
    subprocess.run([str(AUTOFE), "run", "--out", str(out)], check=True, env=env)
    seconds = time.perf_counter() - started
    metrics = json.loads((out / "metrics.json").read_text())
    digest = hashlib.sha256((out / "features" / "catalog.json").read_bytes()).hexdigest()
    return seconds, metrics, digest


def row(load: float, seconds: float, metrics: dict[str, object], digest: str) -> str:
    holdout = metrics["holdout"]
    assert isinstance(holdout, dict)
    rounds = metrics["iterations"]
    assert isinstance(rounds, list)
    return (
        f"| {load:.1f} | {seconds:.0f} | {len(rounds)} | {metrics['stop_reason']} | "
        f"{str(metrics.get('partial')).lower()} | {metrics['accepted']} | "
        f"{holdout['mape']:.2%} | {holdout['median_ape']:.2%} | {digest[:16]} |"
    )


@contextmanager
def burning(n: int) -> Iterator[None]:
    """``n`` CPU-bound processes for as long as the block lasts (ended by their own ids)."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()


if __name__ == "__main__":
    main()
