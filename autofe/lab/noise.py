"""The noise floor of a lab workspace: how much identical runs of one job vary in runtime."""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autofe.errors import ConfigError


@dataclass(frozen=True)
class NoiseRow:
    """Execution-duration statistics (seconds) of one job's successful repeat runs.

    ``std`` (sample) and ``cv`` (std / mean) are None with fewer than two runs.
    """

    job: str
    n: int
    mean: float
    std: float | None
    cv: float | None


JVM_LAUNCH_MS = 2000


def noise_floor(workspace: Path, warmup: int = 0) -> list[NoiseRow]:
    """Per job, n, mean, std and coefficient of variation of ``execution_duration``.

    Reads ``runs/*.json`` and keeps the successful runs tagged ``repeat`` (the runs of
    ``autofe lab generate --repeat-jobs``); failed attempts are left out because a lost node
    cuts their duration short. With ``warmup`` N, a job's repeats numbered below N are left
    out, and so are the N repeats from one whose setup took ≥ ``JVM_LAUNCH_MS`` (it launched a
    JVM, as after a resumed generation; a warm session starts in about 0.1 s): the first runs
    in a fresh JVM pay JIT compilation and a cold page cache, which is start-up, not the job's
    own variation. A workspace generated with ``--fresh-jvm`` launches a JVM for every run, so
    all its runs are equally cold and only the first N repeats are left out. Rows are sorted
    by job name.

    Raises:
        ConfigError: ``workspace`` has no ``runs/`` folder or holds an unreadable run file.
    """
    runs_dir = workspace / "runs"
    if not runs_dir.is_dir():
        raise ConfigError(f"{workspace} has no runs/ folder; is it a lab workspace?")
    repeats: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for path in sorted(runs_dir.glob("*.json")):
        run = _read_run(path)
        if run.get("tags", {}).get("repeat") is not None:
            repeats[str(run["run_name"])].append(run)
    fresh = _fresh_jvm(workspace)
    warm = {job: _warm_seconds(runs, warmup, fresh) for job, runs in sorted(repeats.items())}
    return [_row(job, seconds) for job, seconds in warm.items() if seconds]


def _fresh_jvm(workspace: Path) -> bool:
    """Whether ``lab.json`` says every run launched its own JVM (``--fresh-jvm``)."""
    manifest = workspace / "lab.json"
    if not manifest.is_file():
        return False
    try:
        settings = json.loads(manifest.read_text(encoding="utf-8")).get("settings", {})
    except (OSError, json.JSONDecodeError, AttributeError) as exc:
        raise ConfigError(f"cannot read the lab manifest {manifest}: {exc}") from exc
    return bool(settings.get("fresh_jvm"))


def _warm_seconds(runs: list[dict[str, Any]], warmup: int, fresh_jvm: bool) -> list[float]:
    """Execution seconds of the successful repeats past the warm-up (see :func:`noise_floor`)."""
    out, since_launch = [], warmup
    for run in sorted(runs, key=lambda r: r["tags"]["repeat"]):
        launched = not fresh_jvm and (run.get("setup_duration") or 0) >= JVM_LAUNCH_MS
        since_launch = 0 if launched else since_launch + 1
        warm = run["tags"]["repeat"] >= warmup and since_launch >= warmup
        if warm and run.get("state", {}).get("result_state") == "SUCCESS":
            out.append(run["execution_duration"] / 1000)
    return out


def _row(job: str, values: list[float]) -> NoiseRow:
    """
    >>> _row("j", [1.0, 3.0])
    NoiseRow(job='j', n=2, mean=2.0, std=1.4142135623730951, cv=0.7071067811865476)
    """
    mean = statistics.fmean(values)
    std = statistics.stdev(values) if len(values) > 1 else None
    cv = std / mean if std is not None and mean > 0 else None
    return NoiseRow(job, len(values), mean, std, cv)


def _read_run(path: Path) -> dict[str, Any]:
    try:
        run: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"cannot read run file {path}: {exc}") from exc
    if not isinstance(run, dict) or "run_name" not in run or "execution_duration" not in run:
        raise ConfigError(f"{path} is not a run (run_name and execution_duration needed)")
    return run
