"""Tell special files (FIFOs, devices, sockets) from regular ones before anything opens them.

Every place that takes a path from a user (the CLI's arguments, ingest's inputs and the files
found in its folders, the MCP tools' paths, the warehouse file) asks this first: opening a FIFO
blocks until a writer comes, which for a path a user pointed at by mistake is forever.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

_SPECIAL = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def special_file(path: str | Path) -> str | None:
    """Why ``path`` must not be opened, if it is a FIFO, a device or a socket; else None.

    Opening a FIFO waits for a writer (forever, for a reader that never gets one), a device
    can stream without end (``/dev/zero``) or act when opened (a tape rewinds), and a socket
    cannot be read as a file. ``stat`` tells them apart without opening anything. Links are
    followed; a missing path or a folder is None (its reader reports it).

    >>> special_file("/dev/null")
    'is a character device, not a regular file: refused without opening it'
    >>> special_file("/no/such/file") is None
    True
    """
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    for test, kind in _SPECIAL:
        if test(mode):
            return f"is {kind}, not a regular file: refused without opening it"
    return None
