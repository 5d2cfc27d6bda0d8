"""The nightly lock: atomic creation, a live holder refuses, a dead one is cleared."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from autofe.errors import LockHeld
from autofe.pipelines.nightly_lock import (
    TORN_AFTER_S,
    Holder,
    acquire_lock,
    hold_lock,
    read_holder,
    release_lock,
)


def dead_pid() -> int:
    """The id of a process that has exited (and was reaped)."""
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    return int(child.stdout)


def write_holder(path: Path, pid: int, host: str | None = None) -> None:
    holder = {"pid": pid, "host": host or socket.gethostname(), "started": "2026-11-30T02:00:00"}
    path.write_text(json.dumps(holder))


def test_the_lock_names_its_holder_and_is_released(tmp_path: Path) -> None:
    lock = tmp_path / "nightly.lock"
    with hold_lock(lock) as me:
        assert read_holder(lock) == me
        assert me.pid == os.getpid() and me.host == socket.gethostname()
    assert not lock.exists()


def test_a_live_holder_refuses_a_second_run(tmp_path: Path) -> None:
    lock = tmp_path / "nightly.lock"
    with hold_lock(lock), pytest.raises(LockHeld, match=f"pid {os.getpid()} on "):
        acquire_lock(lock)
    assert not lock.exists()  # the refused attempt did not take the holder's lock away


def test_a_lock_of_a_dead_process_is_cleared_with_a_message(tmp_path: Path) -> None:
    lock = tmp_path / "nightly.lock"
    gone = dead_pid()
    write_holder(lock, gone)
    notices: list[str] = []
    me = acquire_lock(lock, notices.append)
    assert read_holder(lock) == me
    assert len(notices) == 1 and f"pid {gone}" in notices[0] and "no longer running" in notices[0]
    release_lock(lock, me)
    assert not lock.exists()


def test_a_holder_on_another_host_counts_as_live(tmp_path: Path) -> None:
    lock = tmp_path / "nightly.lock"
    write_holder(lock, dead_pid(), host="some-other-host")
    with pytest.raises(LockHeld, match="on some-other-host"):
        acquire_lock(lock)


def test_a_torn_lock_file_is_stale_only_when_old(tmp_path: Path) -> None:
    lock = tmp_path / "nightly.lock"
    lock.write_text("")  # a crash between create and write
    with pytest.raises(LockHeld, match="holder unreadable"):
        acquire_lock(lock)
    old = lock.stat().st_mtime - TORN_AFTER_S - 1
    os.utime(lock, (old, old))
    me = acquire_lock(lock)
    assert read_holder(lock) == me


def test_release_leaves_another_holders_lock_alone(tmp_path: Path) -> None:
    lock = tmp_path / "nightly.lock"
    me = acquire_lock(lock)
    write_holder(lock, me.pid + 1)  # cleared as stale and taken by another process meanwhile
    release_lock(lock, me)
    assert read_holder(lock) == Holder(me.pid + 1, socket.gethostname(), "2026-11-30T02:00:00")


def test_the_lock_is_released_when_the_work_fails(tmp_path: Path) -> None:
    lock = tmp_path / "nightly.lock"
    with pytest.raises(RuntimeError, match="boom"), hold_lock(lock):
        raise RuntimeError("boom")
    assert not lock.exists()


def test_of_many_simultaneous_attempts_exactly_one_gets_the_lock(tmp_path: Path) -> None:
    lock = tmp_path / "nightly.lock"
    won: list[Holder] = []
    refused: list[LockHeld] = []
    start = threading.Barrier(8)

    def attempt() -> None:
        start.wait()
        try:
            won.append(acquire_lock(lock))
        except LockHeld as exc:
            refused.append(exc)

    threads = [threading.Thread(target=attempt) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1 and len(refused) == 7
    assert read_holder(lock) == won[0]


def test_an_unwritable_folder_is_one_clear_error(tmp_path: Path) -> None:
    from autofe.errors import ConfigError

    with pytest.raises(ConfigError, match="cannot create the lock file"):
        acquire_lock(tmp_path / "missing" / "nightly.lock")
