"""Settings and well-known locations, passed in explicitly rather than held globally."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_DIR = PACKAGE_DIR.parent

DEFAULT_DB = Path("autofe.duckdb")


def external_data_dir() -> Path | None:
    """The shared third-party data, if present: ``$AUTOFE_EXTERNAL_DATA`` or ``../shared``.

    >>> external_data_dir() is None or external_data_dir().name == "external"
    True
    """
    env = os.environ.get("AUTOFE_EXTERNAL_DATA")
    candidates = [Path(env)] if env else []
    candidates.append(REPO_DIR.parent / "shared" / "data" / "external")
    return next((p for p in candidates if p.is_dir()), None)


def example_workspace() -> Path:
    """The shipped example workspace every command defaults to.

    A small hand-written Databricks-style workspace until the workload lab generates a real one.
    """
    return REPO_DIR / "examples" / "workspaces" / "mini"


@dataclass(frozen=True)
class IngestSettings:
    """How ``autofe ingest`` runs."""

    db: Path = DEFAULT_DB
    workers: int = max(1, min(4, os.cpu_count() or 1))


def kb_index_dir() -> Path:
    """Where the knowledge-base index lives: ``$AUTOFE_KB_DIR`` or the user cache directory.

    The index is derived data (rebuilt from the packaged corpus when its hash changes), so it
    belongs in a cache, not in the repo or a workspace.
    """
    env = os.environ.get("AUTOFE_KB_DIR")
    if env:
        return Path(env)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "autofe" / "kb-index"
