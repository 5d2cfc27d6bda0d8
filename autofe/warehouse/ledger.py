"""Ingest bookkeeping: content hashes make ingest idempotent, issues are kept for later."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from autofe.errors import IngestError
from autofe.schema import IngestIssue
from autofe.warehouse.write import insert_rows


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
    return content_hash in ingested_among(con, [content_hash])


def ingested_among(con: duckdb.DuckDBPyConnection, content_hashes: Sequence[str]) -> set[str]:
    """The hashes among ``content_hashes`` already ingested: one query for a batch of inputs."""
    if not content_hashes:
        return set()
    rows = con.execute(
        "SELECT content_hash FROM ingested_files "
        "WHERE content_hash IN (SELECT unnest(?::VARCHAR[]))",
        [list(content_hashes)],
    ).fetchall()
    return {row[0] for row in rows}


def record_ingested(
    con: duckdb.DuckDBPyConnection, content_hash: str, path: Path | str, kind: str
) -> None:
    """Mark an input as ingested; call inside the same transaction as its rows."""
    record_ingested_many(con, [(content_hash, path)], kind)


def record_ingested_many(
    con: duckdb.DuckDBPyConnection, entries: Sequence[tuple[str, Path | str]], kind: str
) -> None:
    """Mark several (content hash, path) inputs of one kind as ingested, in one statement."""
    now = _now()
    rows = [
        {"content_hash": h, "path": str(p), "kind": kind, "ingested_at": now} for h, p in entries
    ]
    insert_rows(con, "ingested_files", rows, replace=True)


def record_issues(con: duckdb.DuckDBPyConnection, issues: Iterable[IngestIssue]) -> None:
    now = _now()
    rows = [{**i.as_dict(), "ingested_at": now} for i in issues]
    insert_rows(con, "ingest_issues", rows)


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)
