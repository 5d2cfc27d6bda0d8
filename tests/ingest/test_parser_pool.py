"""Parser worker processes die with the process that opened the pool, even by kill -9.

A killed ``autofe ingest`` used to leave its forkserver, the resource tracker and its parser
workers alive, blocked on pipes (~315 MB per kill). The driver here opens the pool the way
``ingest`` does, in a session of its own, and is killed once its workers exist.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

DRIVER = """
import sys, time
from pathlib import Path
from autofe.ingest.parser_pool import parser_pool
from autofe.ingest.eventlog.parse import parse_or_issue
from autofe.ingest.eventlog.files import LogSource

log = LogSource((Path(sys.argv[1]),))
with parser_pool(2) as pool:
    for future in [pool.submit(parse_or_issue, log) for _ in range(4)]:
        future.result()
    print("parsed", flush=True)
    time.sleep(600)
"""
WAIT_S = 15.0


def _proc_stat(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name (state is [0], ppid [1], start [19])."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None


def _descendants(root: int) -> dict[int, str]:
    """Every process below ``root``, with its start time (so a reused pid is not mistaken)."""
    children: dict[int, list[int]] = {}
    starts: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _proc_stat(int(entry.name))):
            children.setdefault(int(fields[1]), []).append(int(entry.name))
            starts[int(entry.name)] = fields[19]
    found: dict[int, str] = {}
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found[child] = starts[child]
            todo.append(child)
    return found


def _running(procs: dict[int, str]) -> list[int]:
    """The processes still running: same start time, not a zombie."""
    left = []
    for pid, start in procs.items():
        fields = _proc_stat(pid)
        if fields is not None and fields[19] == start and fields[0] != "Z":
            left.append(pid)
    return left


@pytest.fixture
def driver(eventlogs: Path) -> Iterator[subprocess.Popen[str]]:
    log = eventlogs / "dr-elephant" / "event_log_1"
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(log)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_no_process_outlives_a_kill_9_of_the_pool_owner(driver: subprocess.Popen[str]) -> None:
    assert driver.stdout is not None
    assert driver.stdout.readline() == "parsed\n"
    procs = _descendants(driver.pid)
    try:
        commands = [Path(f"/proc/{pid}/cmdline").read_bytes() for pid in procs]
        assert sum(b"forkserver" in c for c in commands) == 3  # the server and two workers
        assert sum(b"resource_tracker" in c for c in commands) == 1
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait()  # reaped, as a shell would
        deadline = time.monotonic() + WAIT_S
        while _running(procs) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _running(procs) == []
    finally:
        for pid in _running(procs):  # only what this test started, by pid
            os.kill(pid, signal.SIGKILL)


def test_alive_tells_a_running_process_from_an_ended_one() -> None:
    from autofe.ingest.parser_pool import alive

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert alive(os.getpid()) and not alive(child.pid)
