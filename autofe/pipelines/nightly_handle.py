"""The scheduler job a night runs (``autofe nightly --handle H``): checked, then reported.

A retraining request is a job in the home's scheduler store (``HOME/scheduler.sqlite``,
:mod:`autofe.scheduler.store`), and ``autofe nightly`` is what runs it. The night checks the
handle before anything else (an unknown or not queued job is a one-line error, nothing made),
reports ``started`` once it holds the lock, and ``succeeded`` or ``failed`` (with the error's
first line) when it ends. A night that finds the lock held never starts, so its job stays
queued for the next try.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from autofe.errors import AutofeError, ConfigError, first_line
from autofe.scheduler.store import STORE_FILE, EventKind, JobStore, UnknownHandle

Notice = Callable[[str], None]
log = logging.getLogger("autofe.nightly")


def check_handle(home: Path, handle: str) -> None:
    """Refuse a handle the home's store does not hold as a queued job.

    The store is only read: a home without one (or no home yet) knows no handle, and is left
    as it was.

    Raises:
        ConfigError: no store, no such job, or the job is not queued (its state named).
    """
    path = home / STORE_FILE
    if not path.is_file():
        raise ConfigError(f"--handle {handle}: no such job (no scheduler store {path})")
    try:
        record = JobStore(path).get(handle)
    except UnknownHandle:
        raise ConfigError(f"--handle {handle}: no such job in {path}") from None
    if record.state != "queued":
        raise ConfigError(
            f"--handle {handle}: job {record.job_id!r} is {record.state}; a night runs only a "
            "queued job"
        )


@contextmanager
def running_job(home: Path, handle: str | None, notice: Notice) -> Iterator[None]:
    """Report ``started`` now, then ``succeeded`` if the block ends normally or ``failed``
    (the error's first line as the reason) if it raises, interrupted included.

    A handle that cannot start (taken by another runner since it was checked, a dependency
    not succeeded) raises before the block runs. A finish that cannot be recorded (the job
    was cancelled meanwhile) is a notice: the night's own outcome stands.

    Raises:
        ScheduleError: the job cannot start.
    """
    if handle is None:
        yield
        return
    store = JobStore(home / STORE_FILE)
    store.report(handle, "started")
    try:
        yield
    except BaseException as exc:
        _finish(store, handle, "failed", notice, first_line(exc))
        raise
    _finish(store, handle, "succeeded", notice, None)


def _finish(
    store: JobStore, handle: str, kind: EventKind, notice: Notice, reason: str | None
) -> None:
    try:
        store.report(handle, kind, reason=reason)
    except (AutofeError, sqlite3.Error) as exc:  # the night's outcome must not be masked
        log.debug("reporting %s for %s failed", kind, handle, exc_info=True)
        notice(f"handle {handle}: could not report {kind} ({first_line(exc)})")
