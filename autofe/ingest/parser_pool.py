"""Worker processes that parse event logs in parallel (parsing is CPU-bound)."""

from __future__ import annotations

import os
import select
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Executor, ProcessPoolExecutor
from contextlib import contextmanager
from multiprocessing import get_context
from pathlib import Path

PARSER_MODULE = "autofe.ingest.eventlog.parse"
POLL_S = 0.5
"""How often a worker without pidfd support looks whether its owner still lives."""


@contextmanager
def parser_pool(workers: int) -> Iterator[Executor | None]:
    """Start ``workers`` parser processes, or yield None to parse in this process.

    Workers come from a ``forkserver`` that has imported only the parser: forking this process
    instead would copy DuckDB's and Arrow's running threads (a deadlock risk), and ``spawn``
    would re-import everything in every worker. The server outlives the pool, so later pools
    start in milliseconds.

    Every worker exits as soon as this process dies, even by ``kill -9`` (no ``finally``
    runs then): the workers hold the forkserver's and the resource tracker's pipes open and
    wait on the task queue forever, so without this one killed ingest left four processes
    and ~315 MB behind. Once the workers are gone, the forkserver and the resource tracker
    see their pipes close and exit by themselves.
    """
    if workers <= 1:
        yield None
        return
    context = get_context("forkserver")
    context.set_forkserver_preload([PARSER_MODULE, __name__])
    with ProcessPoolExecutor(
        max_workers=workers,
        mp_context=context,
        initializer=follow_owner,
        initargs=(os.getpid(),),
    ) as pool:
        yield pool


def follow_owner(owner: int) -> None:
    """Worker initializer: end this process when ``owner`` (the pool's opener) ends.

    The worker's parent is the forkserver, not the owner, so the parent-death signal cannot
    tell; a daemon thread waits on the owner instead.
    """
    threading.Thread(target=_exit_after, args=(owner,), name="follow-owner", daemon=True).start()


def _exit_after(owner: int) -> None:
    """Block until ``owner`` has ended, then leave at once (nothing of the owner's to save)."""
    try:
        fd = os.pidfd_open(owner)
    except (AttributeError, OSError):  # no pidfd (old kernel, not Linux), or owner gone
        while alive(owner):
            time.sleep(POLL_S)
    else:
        select.select([fd], [], [])  # a pidfd turns readable when its process ends
    os._exit(1)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs; a zombie (ended, not yet reaped by its parent) counts as ended.

    >>> alive(os.getpid()), alive(2**22 + 1)
    (True, False)
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc: kill(0) is all there is to go by
    return stat.rpartition(")")[2].split()[0] != "Z"
