"""How long ``autofe run`` takes on the shipped example with its defaults, and what it keeps.

Run: ``.venv/bin/python benchmarks/cycle.py [--repeat 1] [--burners 0] [--warehouse FILE]
[--timeout 7200] [--write docs/results.md]``

``--warehouse FILE`` starts each run from that warehouse (a replica from ``autofe warehouse
replicate``, say: the 100 k- and 1 M-run measurements of issue #29) instead of the example.
The whole process tree's resident set is sampled (``scale.run_measured``) and its peak given.

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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from report import commit, machine, run_and_write
from scale import run_measured

AUTOFE = Path(sys.executable).with_name("autofe")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--burners", type=int, default=0)
    parser.add_argument("--warehouse", type=Path, help="start from this warehouse")
    parser.add_argument("--timeout", type=float, default=7200.0, help="per run, seconds")
    parser.add_argument("--write", type=Path)
    run_and_write("cycle", parser.parse_args(), run)


def run(tmp: Path, args: argparse.Namespace) -> str:
    rows = []
    for i in range(args.repeat):
        load = os.getloadavg()[0]
        with burning(args.burners):
            seconds, peak, metrics, digest = one_run(tmp / f"run{i}", args)
        rows.append(row(load, seconds, peak, metrics, digest))
    start = f" --warehouse {args.warehouse}" if args.warehouse else ""
    lines = [
        f"Commit {commit()}. Machine: {machine()}. Command: `.venv/bin/python "
        f"benchmarks/cycle.py --repeat {args.repeat} --burners {args.burners}{start}`.",
        "",
        "| load avg at start | wall s | peak RSS (tree) GiB | rounds | stop | partial | features "
        "| holdout MAPE | median APE | best baseline MAPE | catalog sha256 |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
    ]
    return "\n".join(lines)


def one_run(out: Path, args: argparse.Namespace) -> tuple[float, int, dict[str, object], str]:
    """Wall seconds of one ``autofe run --out OUT``, its tree's peak resident bytes, its metrics
    and its catalog's sha256."""
    cmd = [str(AUTOFE), "run", "--out", str(out), "--json"]
    cmd += ["--warehouse", str(args.warehouse)] if args.warehouse else []
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # inherited by the run: no model download
    outcome = run_measured(cmd, args.timeout)
    if outcome.status != "ok":
        raise SystemExit(f"autofe run {outcome.status}: {outcome.stderr[-2000:]}")
    metrics = json.loads((out / "metrics.json").read_text())
    digest = hashlib.sha256((out / "features" / "catalog.json").read_bytes()).hexdigest()
    return outcome.seconds, outcome.peak_tree_rss, metrics, digest


def row(load: float, seconds: float, peak: int, metrics: dict[str, object], digest: str) -> str:
    holdout = metrics["holdout"]
    assert isinstance(holdout, dict)
    rounds = metrics["iterations"]
    assert isinstance(rounds, list)
    baselines = metrics.get("baselines") or []
    assert isinstance(baselines, list)
    best = {b["name"]: b["mape"] for b in baselines}.get(str(metrics.get("best_baseline")))
    return (
        f"| {load:.1f} | {seconds:.0f} | {peak / 2**30:.2f} | {len(rounds)} | "
        f"{metrics['stop_reason']} | {str(metrics.get('partial')).lower()} | "
        f"{metrics['accepted']} | {holdout['mape']:.2%} | {holdout['median_ape']:.2%} | "
        f"{'—' if best is None else f'{best:.2%}'} | {digest[:16]} |"
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
