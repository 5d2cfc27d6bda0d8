"""Ingest bookkeeping: content hashes make ingest idempotent, issues are kept for later."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from autofe.errors import IngestError
from autofe.schema import IngestIssue


def hash_bytes(*parts: bytes) -> str:
    """Content hash used as an input's identity.

    >>> hash_bytes(b"a") == hash_bytes(b"a") != hash_bytes(b"b")
    True
    """
    h = hashlib.blake2b(digest_size=20)
    for part in parts:
        h.update(part)
    return h.hexdigest()


def hash_files(paths: Iterable[Path]) -> str:
    """Hash several files as one input (a rolled event log is one application)."""
    h = hashlib.blake2b(digest_size=20)
    for p in paths:
        try:
            with p.open("rb") as f:
                while chunk := f.read(1 << 20):
                    h.update(chunk)
        except OSError as exc:
            raise IngestError(str(p), f"cannot read: {exc.strerror or exc}") from exc
        h.update(b"\0")
    return h.hexdigest()


def already_ingested(con: duckdb.DuckDBPyConnection, content_hash: str) -> bool:
    row = con.execute(
        "SELECT count(*) FROM ingested_files WHERE content_hash = ?", [content_hash]
    ).fetchone()
    return bool(row and row[0])


def record_ingested(
    con: duckdb.DuckDBPyConnection, content_hash: str, path: Path | str, kind: str
) -> None:
    """Mark an input as ingested; call inside the same transaction as its rows."""
    con.execute(
        "INSERT OR REPLACE INTO ingested_files VALUES (?, ?, ?, ?)",
        [content_hash, str(path), kind, _now()],
    )


def record_issues(con: duckdb.DuckDBPyConnection, issues: Iterable[IngestIssue]) -> None:
    rows = [(i.path, i.line, i.reason, i.fatal, _now()) for i in issues]
    if rows:
        con.executemany("INSERT INTO ingest_issues VALUES (?, ?, ?, ?, ?)", rows)


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)
