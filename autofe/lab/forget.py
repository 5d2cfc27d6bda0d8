"""Forget finished runs of a lab workspace, so that resuming the generation runs them again.

A measured runtime is only as good as the machine was quiet: a run that shared the cores with
other heavy work (a test suite, a second generation) is slower than the workload is. Such runs
are forgotten — their done mark ``runs/<id>.json``, their cluster record and event logs, their
manifest entry — and ``autofe lab generate`` with the same settings runs them again (the plan,
parameters and virtual times are a function of the seed). A forgotten attempt takes its
retries with it: a retry's submit time follows its attempt's end, and whether it runs at all
follows the attempt's outcome.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from autofe.errors import ConfigError
from autofe.lab.generate import MANIFEST
from autofe.lab.workspace_writer import write_json


def forget_runs(root: Path, run_ids: Sequence[int]) -> list[int]:
    """Delete ``run_ids`` and their retries from the workspace ``root``; return what was deleted.

    The done marks go first, so an interrupted call leaves runs that are simply not done.

    Raises:
        ConfigError: ``root`` is not a lab workspace, or a run id has no finished run in it.
    """
    runs = _finished(root)
    missing = sorted(set(run_ids) - set(runs))
    if missing:
        raise ConfigError(f"no finished runs {missing} in {root} (nothing was deleted)")
    doomed = sorted(_with_retries(set(run_ids), runs))
    for run_id in doomed:
        (root / "runs" / f"{run_id}.json").unlink()
    for run_id in doomed:
        cluster = str(runs[run_id]["cluster_instance"]["cluster_id"])
        (root / "clusters" / f"{cluster}.json").unlink(missing_ok=True)
        shutil.rmtree(root / "cluster-logs" / cluster, ignore_errors=True)
    _drop_from_manifest(root, doomed)
    return doomed


def _finished(root: Path) -> dict[int, dict[str, Any]]:
    """Every finished run by id (its ``runs/<id>.json``)."""
    if not (root / MANIFEST).is_file() or not (root / "runs").is_dir():
        raise ConfigError(f"{root} is not a lab workspace (no {MANIFEST} and runs/ folder)")
    return {
        int(path.stem): json.loads(path.read_text(encoding="utf-8"))
        for path in (root / "runs").glob("*.json")
        if path.stem.isdigit()
    }


def _with_retries(ids: set[int], runs: dict[int, dict[str, Any]]) -> set[int]:
    """``ids`` and, transitively, every retry of one of them."""
    retries = {r for r, run in runs.items() if _attempt_of(run) in ids and r not in ids}
    return ids | _with_retries(retries, runs) if retries else ids


def _attempt_of(run: dict[str, Any]) -> int | None:
    if int(run.get("attempt_number", 0)) == 0:
        return None
    return int(run["original_attempt_run_id"])


def _drop_from_manifest(root: Path, run_ids: Iterable[int]) -> None:
    manifest = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
    for run_id in run_ids:
        manifest.get("runs", {}).pop(str(run_id), None)
    write_json(root / MANIFEST, manifest)
