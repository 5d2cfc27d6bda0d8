"""The job store: handles survive a restart, states move only as allowed, spend is accrued
per price period, and concurrent writers (threads with their own connections, as the API's
worker threads and a CLI in another process have) never both win a race."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from autofe.errors import ConfigError, ScheduleError
from autofe.scheduler.catalog import Catalog, load_catalog
from autofe.scheduler.jobfile import parse_jobs
from autofe.scheduler.jobs import Placement, Plan, Shape
from autofe.scheduler.plan import plan_jobs
from autofe.scheduler.store import (
    STORE_FILE,
    JobRecord,
    JobStore,
    StateConflict,
    UnknownHandle,
    submit_document,
)

NOW = 1_800_000_000.0  # 2027-01-15, a live clock: deadlines after it are in the future
HOUR = 3600.0


def item(job_id: str, **fields: Any) -> dict[str, Any]:
    return {
        "job_id": job_id,
        "submit": NOW,
        "tier": "P1",
        "account": "team-a",
        "deadline": NOW + 4 * HOUR,
        "shapes": {"m4.xlarge x4": {"p50_s": 1800, "low_s": 1200, "high_s": 2700}},
        **fields,
    }


def plan_for(job_id: str, hourly: float = 3.6, p50: float = 2000.0) -> Plan:
    placement = Placement(Shape("m4.xlarge", 4), "aws", "us-east-1", "spot", 2)
    return Plan(job_id, placement, 2.0, 0.99, p50, 2800.0, 0.1, hourly)


def submit(store: JobStore, *items: dict[str, Any], budgets: Any = ()) -> list[JobRecord]:
    """Hand-built plans at $3.6/h (a dollar per 1000 s): spend is easy to read."""
    doc = {"jobs": list(items), "budgets": list(budgets)}
    jobs = parse_jobs(doc, now=NOW)
    plans = [plan_for(job.job_id) for job in jobs.jobs]
    return store.submit(jobs, {i["job_id"]: i for i in items}, plans, NOW)


@pytest.fixture
def store(tmp_path: Path) -> JobStore:
    return JobStore.in_home(tmp_path)


def test_a_submitted_job_is_queued_with_its_plan_and_request(store: JobStore) -> None:
    request = item("etl-1", labels={"team": "a"})
    (record,) = submit(store, request)
    assert len(record.handle) == 32 and record.state == "queued"
    assert record.plan == plan_for("etl-1")
    assert record.request == request  # verbatim: it can be re-planned or exported later
    assert record.spend_usd == 0.0
    assert record.predicted_completion == NOW + 2000.0  # the plan's median from now
    later = store.get(record.handle, NOW + 600.0)
    assert later.predicted_completion == NOW + 2600.0  # still waiting: it slips
    assert [e.kind for e in later.events] == ["submitted"]


def test_a_run_accrues_spend_at_each_price_and_counts_runtime_events(store: JobStore) -> None:
    (record,) = submit(store, item("etl-1"))
    h = record.handle
    store.report(h, "started", NOW + 100)
    store.report(h, "preempted", NOW + 600)
    store.report(h, "fallback", NOW + 1100, hourly_usd=7.2, reason="2 preemptions")
    mid = store.report(h, "progress", NOW + 1600, progress=0.5)
    # paid: 1000 s at $3.6/h + 500 s at $7.2/h
    assert mid.spend_usd == pytest.approx(1.0 + 1.0)
    # half done in 1500 s: measured 3000 s blended with the plan's 2000 s in equal parts
    assert mid.predicted_completion == pytest.approx(NOW + 100 + 2500.0)
    assert store.get(h, NOW + 2100).spend_usd == pytest.approx(3.0)  # accrues while running
    store.report(h, "upgraded", NOW + 2100, hourly_usd=3.6)
    done = store.report(h, "succeeded", NOW + 3100)
    assert done.state == "succeeded" and done.finished_at == NOW + 3100
    assert done.spend_usd == pytest.approx(4.0)
    assert store.get(h, NOW + 9999).spend_usd == pytest.approx(4.0)  # stopped paying
    assert done.predicted_completion == NOW + 3100
    assert (done.preemptions, done.fallbacks, done.upgrades) == (1, 1, 1)
    kinds = [e.kind for e in done.events]
    assert kinds == [
        "submitted",
        "started",
        "preempted",
        "fallback",
        "progress",
        "upgraded",
        "succeeded",
    ]
    assert done.events[3].detail == {"hourly_usd": 7.2, "reason": "2 preemptions"}


@pytest.mark.parametrize(
    ("steps", "kind", "message"),
    [
        ([], "succeeded", "cannot record 'succeeded': the job is queued"),
        ([], "progress", "cannot record 'progress': the job is queued"),
        (["started"], "started", "cannot record 'started': the job is running"),
        (["started", "failed"], "preempted", "cannot record 'preempted': the job is failed"),
        (["started", "succeeded"], "failed", "cannot record 'failed': the job is succeeded"),
    ],
)
def test_state_transitions_are_validated(
    store: JobStore, steps: list[Any], kind: Any, message: str
) -> None:
    (record,) = submit(store, item("etl-1"))
    for i, step in enumerate(steps):
        store.report(record.handle, step, NOW + i)
    with pytest.raises(StateConflict, match=message) as info:
        store.report(record.handle, kind, NOW + 10, progress=0.5 if kind == "progress" else None)
    assert info.value.job_id == "etl-1"


def test_bad_reports_are_refused(store: JobStore) -> None:
    (record,) = submit(store, item("etl-1"))
    store.report(record.handle, "started", NOW)
    with pytest.raises(ScheduleError, match=r"progress must be in \(0, 1\]"):
        store.report(record.handle, "progress", NOW, progress=1.5)
    with pytest.raises(ScheduleError, match="a progress event needs 'progress'"):
        store.report(record.handle, "progress", NOW)
    with pytest.raises(ScheduleError, match="hourly_usd must be a non-negative number"):
        store.report(record.handle, "fallback", NOW, hourly_usd=-1.0)
    with pytest.raises(ScheduleError, match="cannot report 'cancelled'"):
        store.report(record.handle, "cancelled", NOW)


def test_cancel_is_idempotent_and_a_finished_job_cannot_be_cancelled(store: JobStore) -> None:
    waiting, running, done = submit(store, item("a"), item("b"), item("c"))
    assert store.cancel(waiting.handle, NOW + 5).state == "cancelled"
    again = store.cancel(waiting.handle, NOW + 50)
    assert again.state == "cancelled" and again.finished_at == NOW + 5
    assert [e.kind for e in again.events] == ["submitted", "cancelled"]
    store.report(running.handle, "started", NOW)
    cancelled = store.cancel(running.handle, NOW + 1000)
    assert cancelled.spend_usd == pytest.approx(1.0)  # paid until the cancel
    assert store.get(running.handle, NOW + 5000).spend_usd == pytest.approx(1.0)
    store.report(done.handle, "started", NOW)
    store.report(done.handle, "succeeded", NOW + 10)
    with pytest.raises(StateConflict, match="cannot cancel: the job already succeeded"):
        store.cancel(done.handle)
    with pytest.raises(UnknownHandle, match="no job has handle 'nope'"):
        store.cancel("nope")
    with pytest.raises(UnknownHandle):
        store.get("nope")


def test_a_job_starts_only_after_its_dependencies_succeeded(store: JobStore) -> None:
    first, second = submit(store, item("extract"), item("load", depends_on=["extract"]))
    assert second.predicted_completion == NOW + 4000.0  # after extract's median finish
    with pytest.raises(StateConflict, match="dependency 'extract' has not succeeded"):
        store.report(second.handle, "started", NOW)
    store.report(first.handle, "started", NOW)
    store.report(first.handle, "succeeded", NOW + 10)
    assert store.report(second.handle, "started", NOW + 20).state == "running"


def test_a_restart_loses_no_job(tmp_path: Path) -> None:
    store = JobStore.in_home(tmp_path)
    records = submit(store, *(item(f"job-{i}") for i in range(6)))
    store.report(records[0].handle, "started", NOW)
    store.report(records[0].handle, "succeeded", NOW + 500)
    store.report(records[1].handle, "started", NOW)
    store.cancel(records[2].handle, NOW)
    before = {h: store.get(h, NOW + 900) for h in store.handles()}
    del store
    reopened = JobStore(tmp_path / STORE_FILE)
    assert reopened.handles() == [r.handle for r in records]
    assert {h: reopened.get(h, NOW + 900) for h in reopened.handles()} == before
    states = [before[r.handle].state for r in records]
    assert states == ["succeeded", "running", "cancelled", "queued", "queued", "queued"]


def race(path: Path, actions: list[Any]) -> list[str]:
    """Run each action in its own thread with its own store, all released at once."""
    outcomes: list[str] = []
    barrier = threading.Barrier(len(actions))

    def run(action: Any) -> None:
        store = JobStore(path)  # its own connections, as another process would have
        barrier.wait()
        try:
            outcomes.append(action(store))
        except StateConflict:
            outcomes.append("conflict")

    threads = [threading.Thread(target=run, args=(a,)) for a in actions]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outcomes


def test_concurrent_writers_never_both_win(tmp_path: Path) -> None:
    path = tmp_path / STORE_FILE
    (record,) = submit(JobStore(path), item("etl-1"))
    h = record.handle

    def start(store: JobStore) -> str:
        return store.report(h, "started", NOW).state

    assert sorted(race(path, [start] * 8)) == ["conflict"] * 7 + ["running"]
    assert [e.kind for e in JobStore(path).get(h).events] == ["submitted", "started"]

    def cancel(store: JobStore) -> str:
        return store.cancel(h, NOW + 10).state

    def succeed(store: JobStore) -> str:
        return store.report(h, "succeeded", NOW + 10).state

    outcomes = race(path, [cancel, succeed] * 4)
    final = JobStore(path).get(h)
    finished = [e.kind for e in final.events][2:]
    assert finished == [final.state]  # one terminal event, whichever came first
    if final.state == "succeeded":
        assert sorted(outcomes) == ["conflict"] * 7 + ["succeeded"]
    else:
        assert sorted(outcomes) == ["cancelled"] * 4 + ["conflict"] * 4  # cancel: idempotent


def test_concurrent_submits_all_land(tmp_path: Path) -> None:
    path = tmp_path / STORE_FILE
    JobStore(path)

    def submit_some(worker: int) -> None:
        store = JobStore(path)
        for i in range(5):
            submit(store, item(f"w{worker}-{i}"))

    threads = [threading.Thread(target=submit_some, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    store = JobStore(path)
    ids = sorted(store.get(h).job_id for h in store.handles())
    assert ids == sorted(f"w{w}-{i}" for w in range(4) for i in range(5))


def test_summary_splits_spend_by_account_tier_and_budget_period(store: JobStore) -> None:
    budgets = [
        {"name": "team-a", "usd": 10.0, "period_s": HOUR},
        {"name": "P3", "usd": 5.0, "period_s": HOUR},
    ]
    a, b, c = submit(
        store,
        item("a"),
        item("b", tier="P3"),
        item("c", account="team-b", tier="P3"),
        budgets=budgets,
    )
    start = NOW + HOUR - 500  # the runs straddle an hour boundary (NOW is a whole hour)
    for record in (a, b, c):
        store.report(record.handle, "started", start)
    store.report(a.handle, "preempted", start + 10)
    store.report(c.handle, "succeeded", start + 1000)
    summary = store.summary(NOW + HOUR + 1500)
    spend = {(s.account, s.tier): (round(s.usd, 6), s.preemptions) for s in summary.spend}
    assert spend == {
        ("team-a", "P1"): (2.0, 1),
        ("team-a", "P3"): (2.0, 0),
        ("team-b", "P3"): (1.0, 0),
    }
    # this hour: a and b paid 1500 s each, c 500 s
    assert summary.budget_remaining == pytest.approx({"team-a": 10.0 - 3.0, "P3": 5.0 - 2.0})
    assert summary.jobs_by_state == {
        ("P1", "running"): 1,
        ("P3", "running"): 1,
        ("P3", "succeeded"): 1,
    }


def test_submit_document_plans_with_the_planner_and_checks_tasks(tmp_path: Path) -> None:
    catalog: Catalog = load_catalog()
    store = JobStore.in_home(tmp_path)
    task = {"type": "spark_python", "python_file": "dbfs:/etl.py"}
    doc = {"jobs": [item("etl-1", task=task), item("etl-2", depends_on=["etl-1"], tier="P3")]}
    records = submit_document(store, doc, catalog, NOW)
    assert [r.plan for r in records] == plan_jobs(parse_jobs(doc, catalog, NOW), catalog, NOW)
    assert [r.state for r in records] == ["queued", "queued"]
    bad = {"jobs": [item("etl-3", task={"type": "jar"})]}
    with pytest.raises(ScheduleError, match="job 'etl-3': task type 'jar' is not one of"):
        submit_document(store, bad, catalog, NOW)
    late = {"jobs": [item("etl-4", deadline=NOW - 1, submit=NOW - 100)]}
    with pytest.raises(ScheduleError, match=r"job 'etl-4': deadline .* is in the past"):
        submit_document(store, late, catalog, NOW)
    assert len(store.handles()) == 2  # nothing of a refused document is stored


def test_a_foreign_or_newer_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "junk.sqlite").write_bytes(b"not a database at all" * 100)
    with pytest.raises(ConfigError, match=r"junk\.sqlite"):
        JobStore(tmp_path / "junk.sqlite")
    newer = tmp_path / "newer.sqlite"
    with sqlite3.connect(newer) as con:
        con.execute("PRAGMA user_version = 99")
    with pytest.raises(ConfigError, match="scheduler store schema 99"):
        JobStore(newer)
    with pytest.raises(ConfigError, match="does not exist"):
        JobStore.in_home(tmp_path / "missing")


def test_retier_raises_a_queued_job_with_its_new_request_and_plan(store: JobStore) -> None:
    (record,) = submit(store, item("retrain", tier="P2"))
    urgent = item("retrain", tier="P0", markets=["on-demand"])
    plan = plan_for("retrain", hourly=7.2, p50=1500.0)
    raised = store.retier(record.handle, urgent, plan, NOW + 60.0, reason="degradation")
    assert raised.tier == "P0" and raised.state == "queued"
    assert raised.request == urgent and raised.plan == plan
    assert raised.predicted_completion == NOW + 60.0 + 1500.0
    assert [e.kind for e in raised.events] == ["submitted", "retiered"]
    assert raised.events[-1].detail == {"from": "P2", "to": "P0", "reason": "degradation"}
    summary = store.summary(NOW + 60.0)
    assert summary.jobs_by_state == {("P0", "queued"): 1}
    store.report(record.handle, "started", NOW + 120.0)
    with pytest.raises(StateConflict, match="job 'retrain': cannot change the tier: the job is"):
        store.retier(record.handle, urgent, plan, NOW + 180.0)
    with pytest.raises(ScheduleError, match="cannot report 'retiered'"):
        store.report(record.handle, "retiered", NOW + 200.0)
