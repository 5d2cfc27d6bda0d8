"""One nightly run at a time: a lock file created atomically, holding its owner.

The file is created with ``O_CREAT | O_EXCL``, so of two processes starting together exactly
one gets it, and it names its holder (pid, host, start time) so the next process can tell a
live holder (refuse) from one that died without cleaning up (clear the lock and go on). A
holder on another host cannot be checked and counts as live; a pid that was reused by an
unrelated process also looks live, so such a lock must be deleted by hand (the message says
so).
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from autofe.errors import ConfigError, LockHeld

TORN_AFTER_S = 60.0
"""A lock file without a readable holder this old is the leftover of a crash between create
and write (a live holder writes within microseconds of creating it)."""

Notice = Callable[[str], None]


@dataclass(frozen=True)
class Holder:
    """Who holds a lock."""

    pid: int
    host: str
    started: str

    def describe(self) -> str:
        """
        >>> Holder(42, "etl-1", "2026-11-30T02:00:00+00:00").describe()
        'pid 42 on etl-1 since 2026-11-30T02:00:00+00:00'
        """
        return f"pid {self.pid} on {self.host} since {self.started}"


def this_process() -> Holder:
    """The holder record of the calling process."""
    started = datetime.now(UTC).isoformat(timespec="seconds")
    return Holder(os.getpid(), socket.gethostname(), started)


@contextmanager
def hold_lock(path: Path, notice: Notice | None = None) -> Iterator[Holder]:
    """Hold the lock at ``path`` while the block runs; released however the block ends.

    Raises:
        LockHeld: a live process holds it.
        ConfigError: the lock file cannot be created (folder missing or not writable).
    """
    me = acquire_lock(path, notice)
    try:
        yield me
    finally:
        release_lock(path, me)


def acquire_lock(path: Path, notice: Notice | None = None) -> Holder:
    """Create the lock file for this process, clearing a stale one first.

    Raises:
        LockHeld: a live process holds it.
        ConfigError: the lock file cannot be created.
    """
    me = this_process()
    for _ in range(2):  # a second try only after clearing a stale lock
        if _create(path, me):
            return me
        holder = read_holder(path)
        if not is_stale(path, holder):
            raise LockHeld(str(path), holder.describe() if holder else "holder unreadable")
        _clear(path, holder, notice)
    raise LockHeld(str(path), "taken again while a stale lock was cleared")


def _create(path: Path, me: Holder) -> bool:
    """Create the file atomically and write the holder; False when it exists already."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    except OSError as exc:
        raise ConfigError(f"{path}: cannot create the lock file ({exc.strerror})") from exc
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(asdict(me)) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    return True


def read_holder(path: Path) -> Holder | None:
    """The holder a lock file names, or None when it is unreadable (or gone)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Holder(int(data["pid"]), str(data["host"]), str(data["started"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def is_stale(path: Path, holder: Holder | None) -> bool:
    """A dead pid on this host, or an unreadable file older than :data:`TORN_AFTER_S`."""
    if holder is None:
        try:
            return time.time() - path.stat().st_mtime > TORN_AFTER_S
        except FileNotFoundError:
            return True  # released meanwhile: nothing to clear
    return holder.host == socket.gethostname() and not pid_alive(holder.pid)


def pid_alive(pid: int) -> bool:
    """Whether a process with this id runs on this host (signal 0 checks without sending).

    >>> pid_alive(os.getpid()), pid_alive(0), pid_alive(-1)
    (True, False, False)
    """
    if pid <= 0:  # 0 and negative ids address process groups, never one holder
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by another user
    return True


def _clear(path: Path, holder: Holder | None, notice: Notice | None) -> None:
    """Delete a stale lock, unless another process replaced it since it was read."""
    if not path.exists() or read_holder(path) != holder:
        return
    path.unlink(missing_ok=True)
    if notice is not None:
        who = holder.describe() if holder else "an unreadable holder"
        notice(f"cleared a stale lock {path}: {who} is no longer running")


def release_lock(path: Path, me: Holder) -> None:
    """Delete the lock file if it is still this process's (never another's)."""
    if read_holder(path) == me:
        path.unlink(missing_ok=True)
