"""Confine a path a tool was given to the directories it may read.

Checked after resolving every symlink and ``..``, so a link inside a root that points elsewhere
is refused like the place it points to. A relative path is taken relative to each root in turn
(a tool's caller names files by where they sit in a root, not by the server's working
directory).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from autofe.errors import PathNotAllowed
from autofe.special_file import special_file


def confine(path: str | Path, roots: Sequence[Path]) -> Path:
    """The resolved ``path``, which exists and lies inside one of ``roots``.

    Args:
        path: absolute, or relative to a root.
        roots: the directories that may be read (resolved here too).

    Returns:
        The path with every symlink and ``..`` resolved.

    Raises:
        PathNotAllowed: the path does not exist, resolves outside every root, or is a FIFO,
            device or socket (a tool reading it could hang the server).

    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> (root / "log").write_text("{}")
    2
    >>> confine("log", [root]) == (root / "log").resolve()
    True
    >>> confine("../log", [root])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    autofe.errors.PathNotAllowed: ../log: ...
    """
    allowed = [Path(r).resolve() for r in roots]
    shown = tuple(str(r) for r in allowed)
    if not allowed:
        raise PathNotAllowed(str(path), "no directories are allowed", shown)
    given = Path(path)
    candidates = [given] if given.is_absolute() else [root / given for root in allowed]
    outside: Path | None = None
    for candidate in candidates:
        loose = _resolve(candidate, strict=False)
        if loose is None or not _within(loose, allowed):
            outside = outside or loose
            continue
        resolved = _resolve(candidate, strict=True)
        if resolved is not None:
            refused = special_file(resolved)
            if refused:
                raise PathNotAllowed(str(path), refused, shown)
            return resolved
    if outside is not None:
        # said whether or not it exists: a tool must not reveal what lies outside its roots
        raise PathNotAllowed(str(path), f"resolves to {outside}, outside the allowed roots", shown)
    raise PathNotAllowed(str(path), "no such file", shown)


def _resolve(path: Path, *, strict: bool) -> Path | None:
    """Every link followed; None on a symlink loop or (``strict``) a missing part."""
    try:
        return path.resolve(strict=strict)
    except (OSError, RuntimeError):
        return None


def _within(path: Path, roots: Sequence[Path]) -> bool:
    return any(path == root or path.is_relative_to(root) for root in roots)
