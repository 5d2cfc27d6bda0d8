"""The same ``autofe run`` twice, once beside two CPU-bound processes: the same catalog, the
same metrics. Rounds, targets and the proposal budget decide what is kept, never the clock."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from autofe.agents.settings import LoopSettings
from autofe.config import example_workspace
from autofe.knowledge_base.embeddings import HashingEmbedder
from autofe.knowledge_base.retrieve import KnowledgeBase
from autofe.pipelines.run import RunSettings, run

TIMINGS = {"seconds", "phase_seconds", "gate_seconds", "tokens_per_s"}
"""Keys that measure time: the only part of ``metrics.json`` a loaded machine may change."""


@contextmanager
def burning(n: int) -> Iterator[None]:
    """``n`` CPU-bound processes beside the block, each ended by its own id."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()


def without_timings(value: Any) -> Any:
    """``value`` with every timing key removed, at any depth.

    >>> without_timings({"a": 1, "seconds": 2.5, "b": [{"seconds": {"x": 1}, "c": 3}]})
    {'a': 1, 'b': [{'c': 3}]}
    """
    if isinstance(value, dict):
        return {k: without_timings(v) for k, v in value.items() if k not in TIMINGS}
    if isinstance(value, list):
        return [without_timings(v) for v in value]
    return value


@pytest.mark.slow
def test_the_same_run_idle_and_loaded_keeps_the_same_catalog_and_metrics(
    tmp_path: Path, example_warehouse: Path
) -> None:
    kb = KnowledgeBase(index_dir=tmp_path / "kb", embedder=HashingEmbedder())
    settings = RunSettings(str(example_workspace()), LoopSettings(max_iterations=2, per_round=6))
    idle = run(settings, tmp_path / "idle", kb, warehouse=example_warehouse)
    with burning(2):
        loaded = run(settings, tmp_path / "loaded", kb, warehouse=example_warehouse)
    catalog = Path("features") / "catalog.json"
    assert (idle.out / catalog).read_bytes() == (loaded.out / catalog).read_bytes()
    assert Path(idle.metrics["model"]).parent == idle.out  # the one key naming the run folder
    same = {**idle.metrics, "model": Path(idle.metrics["model"]).name}
    assert without_timings(same) == without_timings(
        {**loaded.metrics, "model": Path(loaded.metrics["model"]).name}
    )
    assert idle.metrics["stop_reason"] == "max_iterations" and not idle.metrics["partial"]
    assert len(idle.metrics["iterations"]) == 2 and idle.metrics["accepted"] > 0
