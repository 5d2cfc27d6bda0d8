"""Write a JSON document so that a reader never sees half of it; append to JSON-lines logs.

Manifests, registry records, catalogs and nightly records are read by other processes (the
prediction API, the next nightly run) while they may be rewritten. The document goes to a
hidden file beside the target first and is then renamed over it: ``os.replace`` is atomic on
one filesystem, so a reader sees the old document or the new one, and a crash leaves the old.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any


def write_json(
    path: Path,
    content: Any,
    *,
    indent: int | None = 2,
    default: Callable[[Any], Any] | None = None,
    compact: bool = False,
) -> None:
    """Replace ``path`` with ``content`` as JSON (one trailing newline), atomically.

    ``compact`` writes without spaces (``separators=(",", ":")``, no indent), the way a REST
    API answers; ``default`` converts what JSON cannot hold (e.g. ``str`` for timestamps).

    >>> import tempfile
    >>> target = Path(tempfile.mkdtemp()) / "a.json"
    >>> write_json(target, {"b": [1, 2]}, compact=True); target.read_text()
    '{"b":[1,2]}\\n'
    >>> sorted(p.name for p in target.parent.iterdir())
    ['a.json']
    """
    if compact:
        text = json.dumps(content, separators=(",", ":"), default=default)
    else:
        text = json.dumps(content, indent=indent, default=default)
    partial = path.with_name(f".{path.name}.tmp")
    partial.write_text(text + "\n", encoding="utf-8")
    os.replace(partial, path)


def append_json_line(
    path: Path, record: Any, *, default: Callable[[Any], Any] | None = None
) -> None:
    """Append ``record`` as one line of a JSON-lines log, on disk before returning (flushed
    and fsynced): a decision or an actual that was acknowledged must survive a crash."""
    line = json.dumps(record, sort_keys=True, default=default) + "\n"
    with path.open("a", encoding="utf-8") as handle:
        handle.write(line)
        handle.flush()
        os.fsync(handle.fileno())


def read_json_lines(path: Path) -> list[dict[str, Any]]:
    """Every JSON object line of ``path``, oldest first (absent: none). A line that is not
    one — a torn last line of a crash, a hand edit — is skipped.

    >>> import tempfile
    >>> log = Path(tempfile.mkdtemp()) / "log.jsonl"
    >>> append_json_line(log, {"a": 1})
    >>> with log.open("a") as torn:
    ...     _ = torn.write('{"a": ')
    >>> read_json_lines(log)
    [{'a': 1}]
    """
    if not path.is_file():
        return []
    found = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            found.append(record)
    return found
