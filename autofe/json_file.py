"""Write a JSON document so that a reader never sees half of it.

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
