"""Job handles that outlive the process: submitted jobs, their plans, states and spend.

An orchestrator submits a job request and gets a *handle* back (``autofe schedule submit``,
``POST /v1/jobs``); whatever runs the job reports what happens to it (started, progress,
preempted, fallback, upgraded, succeeded, failed), and anyone can ask for the job's state,
chosen plan, spend so far and predicted completion, or cancel it.

Everything lives in one SQLite file (``HOME/scheduler.sqlite``) in WAL mode: readers never
block the writer, every change is one ``BEGIN IMMEDIATE`` transaction that re-reads the state
it checks, so two processes cancelling or starting the same job cannot both succeed, and a
restart sees every committed job. Spend is accrued, not reported: a running job pays its plan's
hourly price (the whole cluster's) from its start, at the new price after a fallback or an
upgrade, until it stops; each price period is a *charge*, so a budget's period sees exactly the
part of a run that fell in it (periods as in :func:`autofe.scheduler.queue.window`).
"""

from __future__ import annotations

import json
import math
import sqlite3
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from graphlib import TopologicalSorter
from pathlib import Path
from typing import Any, Literal, get_args

from autofe.errors import ConfigError, ScheduleError
from autofe.scheduler.catalog import Catalog
from autofe.scheduler.export import ExportSettings, Format, export_jobs, read_task
from autofe.scheduler.jobfile import Budget, JobSet, load_document, parse_jobs
from autofe.scheduler.jobs import JobRequest, Placement, Plan, Shape
from autofe.scheduler.plan import PlanSettings, plan_jobs

STORE_FILE = "scheduler.sqlite"
SCHEMA_VERSION = 1

State = Literal["queued", "running", "succeeded", "failed", "cancelled"]
STATES: tuple[State, ...] = ("queued", "running", "succeeded", "failed", "cancelled")
FINISHED: frozenset[str] = frozenset({"succeeded", "failed", "cancelled"})
EventKind = Literal[
    "submitted",
    "started",
    "progress",
    "preempted",
    "fallback",
    "upgraded",
    "succeeded",
    "failed",
    "cancelled",
    "retiered",
]
REPORTED: tuple[EventKind, ...] = tuple(
    k for k in get_args(EventKind) if k not in ("submitted", "cancelled", "retiered")
)
"""What a runner may report; ``submitted``, ``cancelled`` and ``retiered`` come from submit,
cancel and :meth:`JobStore.retier`."""
MOVES: Mapping[str, tuple[frozenset[str], State | None]] = {
    # kind: (states it may happen in, state after it; None: unchanged)
    "started": (frozenset({"queued"}), "running"),
    "progress": (frozenset({"running"}), None),
    "preempted": (frozenset({"running"}), None),
    "fallback": (frozenset({"running"}), None),
    "upgraded": (frozenset({"running"}), None),
    "succeeded": (frozenset({"running"}), "succeeded"),
    "failed": (frozenset({"queued", "running"}), "failed"),
    "cancelled": (frozenset({"queued", "running"}), "cancelled"),
}

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    handle TEXT PRIMARY KEY,
    submission TEXT NOT NULL,
    job_id TEXT NOT NULL,
    account TEXT NOT NULL,
    tier TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('queued','running','succeeded','failed','cancelled')),
    request TEXT NOT NULL,
    plan TEXT NOT NULL,
    submitted_at REAL NOT NULL,
    started_at REAL,
    finished_at REAL,
    hourly_usd REAL NOT NULL,
    progress REAL,
    predicted_completion REAL,
    preemptions INTEGER NOT NULL DEFAULT 0,
    fallbacks INTEGER NOT NULL DEFAULT 0,
    upgrades INTEGER NOT NULL DEFAULT 0,
    updated_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs (state);
CREATE INDEX IF NOT EXISTS jobs_submission ON jobs (submission, job_id);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    handle TEXT NOT NULL REFERENCES jobs (handle),
    at REAL NOT NULL,
    kind TEXT NOT NULL,
    detail TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_handle ON events (handle, id);
CREATE TABLE IF NOT EXISTS charges (
    handle TEXT NOT NULL REFERENCES jobs (handle),
    start REAL NOT NULL,
    stop REAL,
    hourly_usd REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS charges_handle ON charges (handle);
CREATE TABLE IF NOT EXISTS budgets (
    name TEXT PRIMARY KEY,
    usd REAL NOT NULL,
    period_s REAL NOT NULL
);
"""


class UnknownHandle(ScheduleError):
    """No job has this handle (HTTP 404)."""


class StateConflict(ScheduleError):
    """The job's state does not allow the change asked for (HTTP 409)."""


@dataclass(frozen=True)
class Event:
    at: float
    kind: str
    detail: Mapping[str, Any]


@dataclass(frozen=True)
class JobRecord:
    """One submitted job as the store knows it at ``as_of``.

    ``spend_usd`` counts every charge so far, the running one up to ``as_of``;
    ``predicted_completion`` is when the job is expected to finish (seconds, same clock as
    its request): the plan's median from its start (from ``as_of`` while it waits),
    re-estimated from reported progress, and the finish time itself once it has finished.
    """

    handle: str
    job_id: str
    account: str
    tier: str
    state: State
    plan: Plan
    request: Mapping[str, Any]
    submitted_at: float
    started_at: float | None
    finished_at: float | None
    hourly_usd: float
    spend_usd: float
    progress: float | None
    predicted_completion: float | None
    preemptions: int
    fallbacks: int
    upgrades: int
    events: tuple[Event, ...]
    as_of: float

    def plan_line(self) -> str:
        """The plan in one line: shape, place, market, expected cost, P(deadline)."""
        p = self.plan.placement
        return (
            f"{p.shape.key} {p.cloud}/{p.region} {p.market}  "
            f"${self.plan.expected_cost_usd:.2f}  P(deadline) {self.plan.p_deadline:.3f}"
        )

    def describe(self) -> str:
        """What ``autofe schedule status`` prints."""
        eta = "-" if self.predicted_completion is None else _utc(self.predicted_completion)
        return "\n".join(
            [
                f"{self.handle}  {self.job_id} ({self.tier}, account {self.account})",
                f"  state       {self.state}",
                f"  plan        {self.plan_line()}",
                f"  spend       ${self.spend_usd:.2f} so far (${self.hourly_usd:.3f}/h now)",
                f"  completion  {eta} (predicted)",
                f"  events      {self.preemptions} preemptions, {self.fallbacks} fallbacks, "
                f"{self.upgrades} upgrades",
            ]
        )

    def as_dict(self) -> dict[str, Any]:
        """JSON values only (the plan as :func:`plan_dict`)."""
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        out["plan"] = plan_dict(self.plan)
        out["request"] = dict(self.request)
        out["events"] = [{"at": e.at, "kind": e.kind, **e.detail} for e in self.events]
        return out


@dataclass(frozen=True)
class Spend:
    """Spend so far of one account and tier (all periods)."""

    account: str
    tier: str
    usd: float
    preemptions: int
    fallbacks: int
    upgrades: int


@dataclass(frozen=True)
class Summary:
    """What the metrics endpoint reads: spend, budgets left, queue depth, runtime events."""

    spend: tuple[Spend, ...]
    budget_remaining: Mapping[str, float]
    """Budget name → USD left in the current period (negative when overrun)."""
    jobs_by_state: Mapping[tuple[str, str], int]
    """(tier, state) → number of jobs."""


@dataclass(frozen=True)
class Charge:
    """One price period of a job, with the account and tier its spend counts against."""

    handle: str
    account: str
    tier: str
    start: float
    stop: float | None
    """None while it runs: it is paid up to whenever it is looked at."""
    hourly_usd: float


@dataclass(frozen=True)
class Pending:
    """A queued or running job, as far as a budget projection needs it."""

    account: str
    tier: str
    state: State
    hourly_usd: float
    predicted_completion: float | None
    expected_cost_usd: float


@dataclass(frozen=True)
class JobEvent:
    """An event with the job it happened to."""

    handle: str
    job_id: str
    event: Event


@dataclass(frozen=True)
class Snapshot:
    """What a dashboard shows of the store at ``as_of``, read in one connection.

    The latest jobs in full, but every job counted: a page stays as fast with a year of jobs
    as with a day's, and the counts still say how many there are.
    """

    as_of: float
    jobs: tuple[JobRecord, ...]
    """The latest submitted jobs, newest first (at most the ``limit`` asked for)."""
    total: int
    by_state: Mapping[str, int]
    budgets: tuple[Budget, ...]
    charges: tuple[Charge, ...]
    """Every charge paid within the longest budget's current period (none without budgets)."""
    pending: tuple[Pending, ...]
    """Every queued and running job."""
    events: tuple[JobEvent, ...]
    """The latest events of any job, newest first."""
    events_by_kind: Mapping[str, int]


class JobStore:
    """The SQLite file of submitted jobs; every method opens its own connection.

    Safe to share between threads and processes: SQLite's locks serialise the writers and
    each change re-checks the state it depends on inside its transaction.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        with self._connect() as con:
            version = con.execute("PRAGMA user_version").fetchone()[0]
            if version not in (0, SCHEMA_VERSION):
                raise ConfigError(
                    f"{path}: scheduler store schema {version}, this autofe reads {SCHEMA_VERSION}"
                )
            con.execute("PRAGMA journal_mode = WAL")
            if version == 0:
                # idempotent: two processes creating the same new store both succeed
                con.executescript(
                    f"BEGIN IMMEDIATE; {SCHEMA} PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;"
                )

    @classmethod
    def in_home(cls, home: Path) -> JobStore:
        """The store of an autofe home folder (``HOME/scheduler.sqlite``), created if new.

        Raises:
            ConfigError: ``home`` is not a folder.
        """
        if not home.is_dir():
            raise ConfigError(f"home folder {home} does not exist: create it first")
        return cls(home / STORE_FILE)

    # ----------------------------------------------------------------------------- writes

    def submit(
        self,
        jobs: JobSet,
        items: Mapping[str, Mapping[str, Any]],
        plans: Sequence[Plan],
        now: float | None = None,
    ) -> list[JobRecord]:
        """Store a validated job set with its plans (one transaction: all or none).

        ``items`` are the jobs' objects as submitted (job id → object), kept verbatim so the
        request can be read back, re-planned or exported later. The set's budgets replace
        stored budgets of the same name.
        """
        at = time.time() if now is None else now
        submission = uuid.uuid4().hex
        handles = [uuid.uuid4().hex for _ in jobs.jobs]
        finish = expected_finish(jobs.jobs, plans, at)
        with self._write() as con:
            for handle, job, plan in zip(handles, jobs.jobs, plans, strict=True):
                row = (handle, submission, job, items[job.job_id], plan, at, finish[job.job_id])
                self._insert(con, *row)
            for budget in jobs.budgets:
                con.execute(
                    "INSERT INTO budgets VALUES (?, ?, ?) ON CONFLICT (name) DO UPDATE SET "
                    "usd = excluded.usd, period_s = excluded.period_s",
                    (budget.name, budget.usd, budget.period_s),
                )
        return [self.get(handle, at) for handle in handles]

    def report(
        self,
        handle: str,
        kind: EventKind,
        now: float | None = None,
        *,
        progress: float | None = None,
        hourly_usd: float | None = None,
        reason: str | None = None,
    ) -> JobRecord:
        """Record what happened to a job, moving its state when the event does.

        Args:
            progress: the fraction done (``progress`` events; 0 < progress <= 1).
            hourly_usd: the new price of the whole cluster (``fallback``, ``upgraded``);
                unchanged when not given.
            reason: free text kept with the event (why it failed, which placement now).

        Raises:
            UnknownHandle: no such job.
            StateConflict: the event cannot happen in the job's state (e.g. a finished job
                starting again), or a dependency has not succeeded yet (``started``).
            ScheduleError: progress outside (0, 1] or a negative price.
        """
        at = time.time() if now is None else now
        _check_values(kind, progress, hourly_usd, handle)
        with self._write() as con:
            row = self._row(con, handle)
            allowed, after = MOVES[kind]
            if row["state"] not in allowed:
                raise StateConflict(
                    f"cannot record {kind!r}: the job is {row['state']}", row["job_id"]
                )
            if kind == "started":
                self._check_dependencies(con, row)
            self._apply(con, row, kind, at, after, progress, hourly_usd)
            detail = {
                k: v
                for k, v in (("progress", progress), ("hourly_usd", hourly_usd), ("reason", reason))
                if v is not None
            }
            self._event(con, handle, at, kind, detail)
        return self.get(handle, at)

    def cancel(self, handle: str, now: float | None = None) -> JobRecord:
        """Cancel a waiting or running job; cancelling a cancelled job changes nothing.

        Raises:
            UnknownHandle: no such job.
            StateConflict: the job already succeeded or failed.
        """
        at = time.time() if now is None else now
        with self._write() as con:
            row = self._row(con, handle)
            if row["state"] in ("succeeded", "failed"):
                raise StateConflict(
                    f"cannot cancel: the job already {row['state']} at {_utc(row['finished_at'])}",
                    row["job_id"],
                )
            if row["state"] != "cancelled":
                self._apply(con, row, "cancelled", at, "cancelled", None, None)
                self._event(con, handle, at, "cancelled", {})
        return self.get(handle, at)

    def retier(
        self,
        handle: str,
        item: Mapping[str, Any],
        plan: Plan,
        now: float | None = None,
        reason: str = "",
    ) -> JobRecord:
        """Raise a queued job to a more urgent tier, with its request and plan replaced.

        Back-pressure for requests that must not pile up (one open retraining per home): a
        second, more urgent reason to run the same job raises the waiting one instead of
        queueing another. The new ``item`` is the job object as it would now be submitted
        (its tier, deadline and markets), ``plan`` the planner's answer for it.

        Raises:
            UnknownHandle: no such job.
            StateConflict: the job is no longer queued (it started or finished).
        """
        at = time.time() if now is None else now
        with self._write() as con:
            row = self._row(con, handle)
            if row["state"] != "queued":
                raise StateConflict(
                    f"cannot change the tier: the job is {row['state']}", row["job_id"]
                )
            con.execute(
                "UPDATE jobs SET tier = ?, request = ?, plan = ?, hourly_usd = ?, "
                "predicted_completion = ?, updated_at = ? WHERE handle = ?",
                (
                    item["tier"],
                    json.dumps(dict(item), sort_keys=True),
                    json.dumps(plan_dict(plan), sort_keys=True),
                    plan.hourly_usd,
                    at + plan.p50_s,
                    at,
                    handle,
                ),
            )
            detail = {"from": row["tier"], "to": item["tier"], "reason": reason}
            self._event(con, handle, at, "retiered", detail)
        return self.get(handle, at)

    # ------------------------------------------------------------------------------ reads

    def get(self, handle: str, now: float | None = None) -> JobRecord:
        """The job's state, plan, spend and predicted completion as of ``now``.

        Raises:
            UnknownHandle: no such job.
        """
        at = time.time() if now is None else now
        with self._connect() as con:
            row = self._row(con, handle)
            events = con.execute(
                "SELECT at, kind, detail FROM events WHERE handle = ? ORDER BY id", (handle,)
            ).fetchall()
            spend = _spend(con.execute("SELECT * FROM charges WHERE handle = ?", (handle,)), at)
        return _record(row, events, spend, at)

    def handles(self) -> list[str]:
        """Every handle, oldest submission first."""
        with self._connect() as con:
            rows = con.execute("SELECT handle FROM jobs ORDER BY submitted_at, rowid").fetchall()
        return [str(r[0]) for r in rows]

    def summary(self, now: float | None = None) -> Summary:
        """Spend by account and tier, budgets left this period, jobs by tier and state."""
        at = time.time() if now is None else now
        with self._connect() as con:
            charges = con.execute(
                "SELECT c.*, j.account, j.tier FROM charges c JOIN jobs j USING (handle)"
            ).fetchall()
            counts = con.execute(
                "SELECT account, tier, sum(preemptions), sum(fallbacks), sum(upgrades) "
                "FROM jobs GROUP BY account, tier ORDER BY account, tier"
            ).fetchall()
            states = con.execute(
                "SELECT tier, state, count(*) FROM jobs GROUP BY tier, state"
            ).fetchall()
            budgets = [Budget(*r) for r in con.execute("SELECT name, usd, period_s FROM budgets")]
        by_group: dict[tuple[str, str], float] = {}
        for c in charges:
            key = (c["account"], c["tier"])
            by_group[key] = by_group.get(key, 0.0) + _charged(c, -math.inf, at)
        spend = tuple(
            Spend(a, t, round(by_group.get((a, t), 0.0), 9), int(p), int(f), int(u))
            for a, t, p, f, u in counts
        )
        remaining = {b.name: b.usd - _period_spend(b, charges, at) for b in budgets}
        return Summary(spend, remaining, {(t, s): int(n) for t, s, n in states})

    def remaining(self, budget: Budget, now: float | None = None) -> float:
        """What ``budget`` would have left in the period of ``now`` (negative: overrun), from
        the spend of its account's (or tier's) jobs, whether or not it is stored yet."""
        at = time.time() if now is None else now
        with self._connect() as con:
            charges = con.execute(
                "SELECT c.*, j.account, j.tier FROM charges c JOIN jobs j USING (handle) "
                "WHERE j.account = ? OR j.tier = ?",
                (budget.name, budget.name),
            ).fetchall()
        return budget.usd - _period_spend(budget, charges, at)

    def snapshot(self, now: float | None = None, limit: int = 200, events: int = 200) -> Snapshot:
        """The latest ``limit`` jobs with their events and spend, counts by state, budgets with
        the charges and waiting work of their current periods, and the latest ``events`` events;
        one connection and a fixed number of queries, however many jobs the store holds."""
        at = time.time() if now is None else now
        with self._connect() as con:
            latest = "SELECT handle FROM jobs ORDER BY submitted_at DESC, rowid DESC LIMIT ?"
            rows = con.execute(
                "SELECT * FROM jobs ORDER BY submitted_at DESC, rowid DESC LIMIT ?", (limit,)
            ).fetchall()
            by_handle: dict[str, list[sqlite3.Row]] = {}
            for e in con.execute(
                f"SELECT handle, at, kind, detail FROM events WHERE handle IN ({latest}) "
                "ORDER BY id",
                (limit,),
            ):
                by_handle.setdefault(e["handle"], []).append(e)
            spend: dict[str, float] = {}
            for c in con.execute(f"SELECT * FROM charges WHERE handle IN ({latest})", (limit,)):
                spend[c["handle"]] = spend.get(c["handle"], 0.0) + _charged(c, -math.inf, at)
            budgets = tuple(
                Budget(*r) for r in con.execute("SELECT name, usd, period_s FROM budgets")
            )
            jobs = tuple(
                _record(r, by_handle.get(r["handle"], ()), spend.get(r["handle"], 0.0), at)
                for r in rows
            )
            return Snapshot(
                as_of=at,
                jobs=jobs,
                total=int(con.execute("SELECT count(*) FROM jobs").fetchone()[0]),
                by_state=_counts(con, "SELECT state, count(*) FROM jobs GROUP BY state"),
                budgets=budgets,
                charges=_period_charges(con, budgets, at),
                pending=_pending(con, at),
                events=_latest_events(con, events),
                events_by_kind=_counts(con, "SELECT kind, count(*) FROM events GROUP BY kind"),
            )

    # ---------------------------------------------------------------------------- helpers

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        try:
            con = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
        except sqlite3.Error as exc:
            raise ConfigError(f"cannot open the scheduler store {self.path}: {exc}") from None
        con.row_factory = sqlite3.Row
        try:
            con.execute("PRAGMA synchronous = FULL")
            yield con
        except sqlite3.DatabaseError as exc:
            raise ConfigError(f"scheduler store {self.path}: {exc}") from None
        finally:
            con.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One immediate transaction: the write lock is taken before anything is read."""
        with self._connect() as con:
            con.execute("BEGIN IMMEDIATE")
            try:
                yield con
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")

    def _row(self, con: sqlite3.Connection, handle: str) -> sqlite3.Row:
        row: sqlite3.Row | None = con.execute(
            "SELECT * FROM jobs WHERE handle = ?", (handle,)
        ).fetchone()
        if row is None:
            raise UnknownHandle(f"no job has handle {handle!r} in {self.path}")
        return row

    def _insert(
        self,
        con: sqlite3.Connection,
        handle: str,
        submission: str,
        job: JobRequest,
        item: Mapping[str, Any],
        plan: Plan,
        at: float,
        finish: float,
    ) -> None:
        con.execute(
            "INSERT INTO jobs (handle, submission, job_id, account, tier, state, request, plan, "
            "submitted_at, hourly_usd, predicted_completion, updated_at) "
            "VALUES (?, ?, ?, ?, ?, 'queued', ?, ?, ?, ?, ?, ?)",
            (
                handle,
                submission,
                job.job_id,
                job.account,
                job.tier,
                json.dumps(item, sort_keys=True),
                json.dumps(plan_dict(plan), sort_keys=True),
                at,
                plan.hourly_usd,
                finish,
                at,
            ),
        )
        self._event(con, handle, at, "submitted", {})

    def _check_dependencies(self, con: sqlite3.Connection, row: sqlite3.Row) -> None:
        deps = json.loads(row["request"]).get("depends_on") or []
        for dep in deps:
            found = con.execute(
                "SELECT state FROM jobs WHERE submission = ? AND job_id = ?",
                (row["submission"], dep),
            ).fetchone()
            if found is None or found["state"] != "succeeded":
                state = "missing" if found is None else found["state"]
                raise StateConflict(
                    f"cannot start: dependency {dep!r} has not succeeded ({state})", row["job_id"]
                )

    def _apply(
        self,
        con: sqlite3.Connection,
        row: sqlite3.Row,
        kind: str,
        at: float,
        after: State | None,
        progress: float | None,
        hourly_usd: float | None,
    ) -> None:
        handle = row["handle"]
        rate = row["hourly_usd"] if hourly_usd is None else hourly_usd
        if row["state"] == "running" and (after is not None or rate != row["hourly_usd"]):
            con.execute(
                "UPDATE charges SET stop = ? WHERE handle = ? AND stop IS NULL", (at, handle)
            )
        if after == "running" or (after is None and rate != row["hourly_usd"]):
            con.execute("INSERT INTO charges VALUES (?, ?, NULL, ?)", (handle, at, rate))
        counter = {"preempted": "preemptions", "fallback": "fallbacks", "upgraded": "upgrades"}
        sets = {"hourly_usd": rate, "updated_at": at}
        if kind in counter:
            sets[counter[kind]] = row[counter[kind]] + 1
        if after is not None:
            sets["state"] = after
            sets["started_at" if after == "running" else "finished_at"] = at
        if after is not None and after != "running":
            sets["predicted_completion"] = at
        elif kind == "started":
            sets["predicted_completion"] = at + json.loads(row["plan"])["p50_s"]
        elif progress is not None:
            sets["progress"] = progress
            plan_p50 = json.loads(row["plan"])["p50_s"]
            sets["predicted_completion"] = completion(row["started_at"], plan_p50, progress, at)
        columns = ", ".join(f"{k} = ?" for k in sets)
        con.execute(f"UPDATE jobs SET {columns} WHERE handle = ?", (*sets.values(), handle))

    @staticmethod
    def _event(
        con: sqlite3.Connection, handle: str, at: float, kind: str, detail: Mapping[str, Any]
    ) -> None:
        con.execute(
            "INSERT INTO events (handle, at, kind, detail) VALUES (?, ?, ?, ?)",
            (handle, at, kind, json.dumps(detail, sort_keys=True)),
        )


def submit_document(
    store: JobStore,
    doc: object,
    catalog: Catalog,
    now: float,
    settings: PlanSettings | None = None,
    where: str = "jobs",
) -> list[JobRecord]:
    """An orchestrator's submit: validate a jobs document, plan its jobs, store them.

    A job's ``task`` object, when given, is checked now, so a later export cannot fail on it.

    Raises:
        ScheduleError: the document or a job is invalid (naming the job); nothing is stored.
    """
    jobs = parse_jobs(doc, catalog, now, where)
    assert isinstance(doc, dict)  # parse_jobs checked
    items = {item["job_id"]: item for item in doc["jobs"]}
    for job in jobs.jobs:
        if "task" in items[job.job_id]:
            read_task(job, items[job.job_id])
    return store.submit(jobs, items, plan_jobs(jobs, catalog, now, settings), now)


def read_document(path: Path) -> object:
    """A jobs file's JSON, for :func:`submit_document` (which validates it).

    Raises:
        ScheduleError: the file cannot be read as JSON.
    """
    return load_document(path)


def export_stored(
    fmt: Format,
    store: JobStore,
    handle: str,
    catalog: Catalog,
    now: float,
    settings: ExportSettings | None = None,
) -> tuple[str, dict[str, Any]]:
    """A submitted job's stored plan as a payload, for a run starting now.

    Raises:
        UnknownHandle: no such job.
        ScheduleError: the request has no task, or the plan cannot be expressed.
    """
    record = store.get(handle, now)
    job = record_job(record)
    items = {job.job_id: record.request}
    payloads = export_jobs(fmt, [job], items, [record.plan], catalog, now, settings, [handle])
    return job.job_id, payloads[0]


def record_job(record: JobRecord) -> JobRequest:
    """The request of a stored job, validated again (its dependencies are the store's to keep).

    Raises:
        ScheduleError: the stored request no longer validates (naming the job).
    """
    alone = {**record.request, "depends_on": []}
    return parse_jobs({"jobs": [alone]}, where=f"handle {record.handle}").jobs[0]


def expected_finish(
    jobs: Sequence[JobRequest], plans: Sequence[Plan], now: float
) -> dict[str, float]:
    """Each job's median finish if it starts once submitted and its dependencies finished.

    >>> from autofe.scheduler.jobs import Estimate
    >>> a = JobRequest("a", 0.0, {"x x1": Estimate(1, 1, 1)})
    >>> b = JobRequest("b", 0.0, {"x x1": Estimate(1, 1, 1)}, depends_on=("a",))
    >>> p = Placement(Shape("x"), "aws", "r", "spot")
    >>> expected_finish([b, a], [Plan("b", p, 1, 1, 50, 60), Plan("a", p, 1, 1, 100, 120)], 10)
    {'a': 110.0, 'b': 160.0}
    """
    by_id = {job.job_id: (job, plan) for job, plan in zip(jobs, plans, strict=True)}
    order = TopologicalSorter({job.job_id: job.depends_on for job in jobs}).static_order()
    finish: dict[str, float] = {}
    for job_id in order:
        job, plan = by_id[job_id]
        start = max([now, job.submit, *(finish[d] for d in job.depends_on if d in finish)])
        finish[job_id] = float(start + plan.p50_s)
    return finish


def completion(started_at: float, p50_s: float, progress: float, at: float) -> float:
    """When a job finishes, from the fraction done ``progress`` at ``at``.

    The measured pace (``elapsed / progress``) replaces the plan's median in proportion to
    the progress, so an early report moves the estimate a little and a late one a lot.

    >>> completion(0.0, 1000.0, 0.5, 800.0)  # half done in 800 s: 1600 s measured, 1000 planned
    1300.0
    """
    elapsed = max(at - started_at, 0.0)
    total = (1.0 - progress) * p50_s + progress * (elapsed / progress)
    return started_at + max(total, elapsed)


def plan_dict(plan: Plan) -> dict[str, Any]:
    """A plan as JSON values (the shape by its key), read back by :func:`plan_from_dict`."""
    placement = plan.placement
    return {
        "job_id": plan.job_id,
        "shape": placement.shape.key,
        "cloud": placement.cloud,
        "region": placement.region,
        "market": placement.market,
        "fallback_after": placement.fallback_after,
        "expected_cost_usd": plan.expected_cost_usd,
        "p_deadline": plan.p_deadline,
        "p50_s": plan.p50_s,
        "high_s": plan.high_s,
        "expected_preemptions": plan.expected_preemptions,
        "hourly_usd": plan.hourly_usd,
    }


def plan_from_dict(data: Mapping[str, Any]) -> Plan:
    """The inverse of :func:`plan_dict`.

    >>> p = Plan("j", Placement(Shape("m4.large", 2), "aws", "us-east-1", "spot", 2), 1.0, 0.9,
    ...          60.0, 90.0)
    >>> plan_from_dict(plan_dict(p)) == p
    True
    """
    placement = Placement(
        Shape.parse(data["shape"]),
        data["cloud"],
        data["region"],
        data["market"],
        data["fallback_after"],
    )
    fields = ("expected_cost_usd", "p_deadline", "p50_s", "high_s")
    extra = ("expected_preemptions", "hourly_usd")
    return Plan(data["job_id"], placement, *(data[k] for k in fields), *(data[k] for k in extra))


def _record(row: sqlite3.Row, events: Iterable[sqlite3.Row], spend: float, at: float) -> JobRecord:
    return JobRecord(
        handle=row["handle"],
        job_id=row["job_id"],
        account=row["account"],
        tier=row["tier"],
        state=row["state"],
        plan=plan_from_dict(json.loads(row["plan"])),
        request=json.loads(row["request"]),
        submitted_at=row["submitted_at"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        hourly_usd=row["hourly_usd"],
        spend_usd=round(spend, 9),
        progress=row["progress"],
        predicted_completion=_predicted(row, at),
        preemptions=row["preemptions"],
        fallbacks=row["fallbacks"],
        upgrades=row["upgrades"],
        events=tuple(Event(e["at"], e["kind"], json.loads(e["detail"])) for e in events),
        as_of=at,
    )


def _predicted(row: sqlite3.Row, at: float) -> float | None:
    """A waiting job has not started: its median from now, never before the stored guess."""
    stored: float | None = row["predicted_completion"]
    if row["state"] == "queued":
        p50 = float(json.loads(row["plan"])["p50_s"])
        return max(at + p50, stored or -math.inf)
    return stored


def _counts(con: sqlite3.Connection, sql: str) -> dict[str, int]:
    return {str(k): int(n) for k, n in con.execute(sql)}


def _period_charges(
    con: sqlite3.Connection, budgets: Sequence[Budget], at: float
) -> tuple[Charge, ...]:
    """The charges paid since the earliest start of a budget's current period."""
    if not budgets:
        return ()
    since = min(math.floor(at / b.period_s) * b.period_s for b in budgets)
    rows = con.execute(
        "SELECT c.handle, j.account, j.tier, c.start, c.stop, c.hourly_usd FROM charges c "
        "JOIN jobs j USING (handle) WHERE (c.stop IS NULL OR c.stop > ?) AND c.start < ? "
        "ORDER BY c.start",
        (since, at),
    )
    return tuple(Charge(*r) for r in rows)


def _pending(con: sqlite3.Connection, at: float) -> tuple[Pending, ...]:
    """Queued and running jobs; a queued one completes its median after ``at`` at the
    earliest, as :func:`_predicted` says of it."""
    rows = con.execute(
        "SELECT account, tier, state, hourly_usd, CASE WHEN state = 'queued' THEN "
        "max(? + json_extract(plan, '$.p50_s'), coalesce(predicted_completion, 0)) "
        "ELSE predicted_completion END, json_extract(plan, '$.expected_cost_usd') FROM jobs "
        "WHERE state IN ('queued', 'running')",
        (at,),
    )
    return tuple(Pending(a, t, s, h, p, float(c or 0.0)) for a, t, s, h, p, c in rows)


def _latest_events(con: sqlite3.Connection, n: int) -> tuple[JobEvent, ...]:
    rows = con.execute(
        "SELECT e.handle, j.job_id, e.at, e.kind, e.detail FROM events e "
        "JOIN jobs j USING (handle) ORDER BY e.id DESC LIMIT ?",
        (n,),
    )
    return tuple(JobEvent(h, j, Event(at, k, json.loads(d))) for h, j, at, k, d in rows)


def _utc(seconds: float) -> str:
    """RFC 3339 in UTC, to the second.

    >>> _utc(0.0)
    '1970-01-01T00:00:00Z'
    """
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _spend(charges: Iterable[sqlite3.Row], at: float) -> float:
    return sum((_charged(c, -math.inf, at) for c in charges), 0.0)


def _charged(charge: sqlite3.Row, start: float, stop: float) -> float:
    """USD of one charge paid within ``[start, stop)`` (an open charge runs until ``stop``)."""
    begin: float = max(charge["start"], start)
    end: float = min(stop if charge["stop"] is None else charge["stop"], stop)
    return max(end - begin, 0.0) * float(charge["hourly_usd"]) / 3600.0


def _period_spend(budget: Budget, charges: Sequence[sqlite3.Row], at: float) -> float:
    """What the budget's jobs (its account's, or its tier's) paid in the period of ``at``."""
    start = math.floor(at / budget.period_s) * budget.period_s
    mine = [c for c in charges if budget.name in (c["account"], c["tier"])]
    return sum((_charged(c, start, at) for c in mine), 0.0)


def _check_values(kind: str, progress: float | None, hourly: float | None, handle: str) -> None:
    if kind not in MOVES or kind == "cancelled":
        raise ScheduleError(f"handle {handle}: cannot report {kind!r} (one of {REPORTED})")
    if progress is not None and not (0.0 < progress <= 1.0 and kind == "progress"):
        raise ScheduleError(f"handle {handle}: progress must be in (0, 1] on a progress event")
    if kind == "progress" and progress is None:
        raise ScheduleError(f"handle {handle}: a progress event needs 'progress'")
    if hourly is not None and not (math.isfinite(hourly) and hourly >= 0):
        raise ScheduleError(f"handle {handle}: hourly_usd must be a non-negative number")
