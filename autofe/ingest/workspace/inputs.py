"""Find a workspace's files and read each one: its bytes, parsed JSON (or CSV), or why not."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autofe.errors import IngestError
from autofe.ingest.workspace.issues import new_issue
from autofe.schema import IngestIssue
from autofe.special_file import special_file


@dataclass(frozen=True)
class InputFile:
    """One input file: its bytes (part of its ledger identity) and parsed content."""

    path: Path
    kind: str
    data: bytes
    content: Any = None
    problem: IngestIssue | None = None


JSON_KINDS = ("node_types", "clusters", "jobs", "runs", "table_stats")


def is_workspace(path: Path) -> bool:
    """A folder laid out like a workspace export: a ``jobs.json``, or JSON in ``jobs/``/``runs/``.

    >>> is_workspace(Path("/no/such/folder"))
    False
    """
    if not path.is_dir():
        return False
    folders = (path / "jobs", path / "runs")
    return (path / "jobs.json").is_file() or any(any(f.glob("*.json")) for f in folders)


def input_paths(root: Path, kind: str) -> list[Path]:
    """``<kind>.json`` at the root, then the JSON (and, for table stats, CSV) in ``<kind>/``."""
    single = [root / f"{kind}.json"] if _file_like(root / f"{kind}.json") else []
    folder = root / kind
    suffixes = (".json", ".csv") if kind == "table_stats" else (".json",)
    files = sorted(p for p in folder.glob("*") if p.suffix in suffixes) if folder.is_dir() else []
    return single + [p for p in files if _file_like(p)]


def _file_like(path: Path) -> bool:
    """A file, or a FIFO, device or socket named like one (listed, to be refused by name)."""
    return path.is_file() or special_file(path) is not None


def read_input(path: Path, kind: str) -> InputFile:
    """Read and parse one file; an unreadable or unparseable file becomes a fatal issue."""
    refused = special_file(path)
    if refused:
        return InputFile(path, kind, b"", problem=new_issue(path, refused, True))
    try:
        data = path.read_bytes()
    except OSError as exc:
        return InputFile(
            path, kind, b"", problem=new_issue(path, f"cannot read: {exc.strerror}", True)
        )
    try:
        return InputFile(path, kind, data, content=_parse(path, data))
    except IngestError as exc:
        return InputFile(
            path, kind, data, problem=IngestIssue(exc.path, exc.reason, exc.line, True)
        )


def _parse(path: Path, data: bytes) -> Any:
    """JSON content, or for a ``.csv`` the ``(line, row)`` pairs of its records.

    Raises:
        IngestError: the file is not UTF-8 or not valid JSON (with the line of the error).
    """
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise IngestError(str(path), f"not UTF-8 text: {exc.reason}") from exc
    if path.suffix == ".csv":
        reader = csv.DictReader(io.StringIO(text))
        return [(reader.line_num, row) for row in reader]
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise IngestError(str(path), f"invalid JSON: {exc.msg}", exc.lineno) from exc


def read_inputs(root: Path) -> list[InputFile]:
    """Every JSON (and table-stats CSV) file of the workspace, read, kind by kind."""
    return [read_input(p, k) for k in JSON_KINDS for p in input_paths(root, k)]


def event_log_paths(root: Path) -> list[Path]:
    """Event logs of a workspace: each cluster-log-delivery leaf folder, and ``eventlogs/*``.

    Cluster log delivery writes ``<cluster_id>/eventlog/<cluster_id>_<ip>/<context_id>/`` with
    ``eventlog`` plus rolled ``eventlog-<time>.gz`` parts: one application, so the folder is
    passed as one rolled log.
    """
    leaves: set[Path] = set()
    delivery = root / "cluster-logs"
    if delivery.is_dir():
        for f in delivery.rglob("eventlog*"):
            if f.is_file() and "eventlog" in f.relative_to(delivery).parts[:-1]:
                leaves.add(f.parent)
    plain = root / "eventlogs"
    if plain.is_dir():
        leaves.update(p for p in plain.iterdir() if not p.name.startswith("."))
    return sorted(leaves)
