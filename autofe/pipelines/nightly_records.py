"""What the nightly job leaves behind, read without the nightly job: ``nightly.json`` per night.

The server (the dashboard, the retraining triggers) and the retraining estimate read past
nights; importing :mod:`autofe.pipelines.nightly` for that would pull the whole agent loop into
every process that only wants a file name and a list of records.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal, get_args

RECORD_FILE = "nightly.json"
NIGHTS_DIR = "nightly"
Mode = Literal["incremental", "full"]
"""``incremental``: warm started from the active model's catalog; ``full``: from scratch."""
MODES: tuple[Mode, ...] = get_args(Mode)


def nightly_history(home: Path) -> list[dict[str, Any]]:
    """Every night's record under ``home``, oldest first; a folder without one (a process
    killed outright) is listed as ``incomplete``."""
    root = home / NIGHTS_DIR
    if not root.is_dir():
        return []
    records = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        path = folder / RECORD_FILE
        try:
            records.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            records.append({"stamp": folder.name, "status": "incomplete"})
    return records


def latest_done(home: Path) -> dict[str, Any] | None:
    """The latest night that finished (status ``done``), if any."""
    for record in reversed(nightly_history(home)):
        if isinstance(record, dict) and record.get("status") == "done":
            return record
    return None
