"""How a workspace file's problems are worded in the report and the ``ingest_issues`` table."""

from __future__ import annotations

from pathlib import Path

from autofe.errors import IngestError
from autofe.ingest.conform import UnstorableKey
from autofe.schema import IngestIssue


def new_issue(path: Path, reason: str, fatal: bool = False, line: int | None = None) -> IngestIssue:
    """An issue about one workspace file (its line, for a CSV record).

    >>> new_issue(Path("runs/1.json"), "bad", fatal=True)
    IngestIssue(path='runs/1.json', reason='bad', line=None, fatal=True)
    """
    return IngestIssue(str(path), reason, line, fatal)


def why(exc: Exception) -> str:
    """An unforeseen failure as the report shows it (our own errors say it themselves)."""
    if isinstance(exc, IngestError):
        return exc.reason
    if isinstance(exc, UnstorableKey):
        return str(exc)
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= 200 else f"{text[:200]}…"  # an OSError quotes its whole path
