"""Resource limits of the SQL sandbox."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from autofe.errors import ConfigError

BATCH_MAX_SPILL = "16GB"
"""The most one batch query may spill (:func:`spilling`). At 1 M runs the four features of the
example's catalogs that need more than 1 GB spilled 0.2 to 2.3 GB each (``docs/results.md``)."""


@dataclass(frozen=True)
class SandboxLimits:
    """Limits DuckDB enforces on every sandboxed query."""

    memory_limit: str = "1GB"
    threads: int = 2
    timeout_s: float = 10.0
    max_rows: int = 100_000
    spill_dir: str = ""
    """Where a query over ``memory_limit`` may spill (DuckDB's ``temp_directory``); empty: it
    fails instead. Only batches of admitted features set it (a window over a million runs
    needs more than 1 GB at once); an interactive query, the LLM's, never spills. DuckDB lets a
    query read its own temp folder, but the guard refuses every file function."""
    max_spill: str = "0B"
    """The most a query may spill into ``spill_dir``."""


@contextmanager
def spilling(limits: SandboxLimits, folder: Path) -> Iterator[SandboxLimits]:
    """``limits`` letting a query spill up to :data:`BATCH_MAX_SPILL` into ``folder`` (made
    here, removed after): for a batch over every run of a large history, where a few admitted
    features' windows need more than the memory limit at once and would otherwise be left out.

    Raises:
        ConfigError: ``folder`` cannot be made.
    """
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot make the spill folder {folder}: {exc.strerror or exc}") from exc
    try:
        yield replace(limits, spill_dir=str(folder), max_spill=BATCH_MAX_SPILL)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
