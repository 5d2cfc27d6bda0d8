"""The store's dashboard snapshot (the latest jobs in full, every job counted, one connection)
and each budget's current period read from it: spend so far agrees with the store's own
summary, the curve climbs at the running jobs' prices, and the projection adds what the
waiting work is committed to."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from autofe.scheduler.budget_period import budget_periods, spend_curve
from autofe.scheduler.jobfile import parse_jobs
from autofe.scheduler.jobs import Placement, Plan, Shape
from autofe.scheduler.store import Charge, JobRecord, JobStore

NOW = 1_800_000_000.0  # a whole hour (and day): periods start here
HOUR = 3600.0


def item(job_id: str, **fields: Any) -> dict[str, Any]:
    return {
        "job_id": job_id,
        "submit": NOW,
        "tier": "P1",
        "account": "team-a",
        "shapes": {"m4.xlarge x4": {"p50_s": 1800, "low_s": 1200, "high_s": 2700}},
        **fields,
    }


def submit(store: JobStore, *items: dict[str, Any], budgets: Any = ()) -> list[JobRecord]:
    """Plans at $3.6/h (a dollar per 1000 s) costing $2 each, 2000 s long."""
    jobs = parse_jobs({"jobs": list(items), "budgets": list(budgets)}, now=NOW)
    placement = Placement(Shape("m4.xlarge", 4), "aws", "us-east-1", "spot", 2)
    plans = [Plan(j.job_id, placement, 2.0, 0.99, 2000.0, 2800.0, 0.1, 3.6) for j in jobs.jobs]
    return store.submit(jobs, {i["job_id"]: i for i in items}, plans, NOW)


@pytest.fixture
def store(tmp_path: Path) -> JobStore:
    return JobStore.in_home(tmp_path)


def test_the_snapshot_holds_the_latest_jobs_as_get_reads_them(store: JobStore) -> None:
    records = [submit(store, item(f"j{i}"))[0] for i in range(5)]
    store.report(records[1].handle, "started", NOW + 10)
    store.report(records[1].handle, "fallback", NOW + 20, hourly_usd=7.2, reason="on-demand")
    store.report(records[2].handle, "failed", NOW + 30, reason="bad input")
    at = NOW + 1000
    full = store.snapshot(at, limit=10, events=100)
    assert [j.handle for j in full.jobs] == [r.handle for r in reversed(records)]
    assert list(full.jobs) == [store.get(r.handle, at) for r in reversed(records)]
    latest = store.snapshot(at, limit=2, events=2)
    assert [j.job_id for j in latest.jobs] == ["j4", "j3"]
    assert latest.total == 5 and latest.by_state == {"queued": 3, "running": 1, "failed": 1}
    assert [(e.job_id, e.event.kind) for e in latest.events] == [
        ("j2", "failed"),
        ("j1", "fallback"),
    ]
    assert latest.events[1].event.detail == {"hourly_usd": 7.2, "reason": "on-demand"}
    assert latest.events_by_kind == {"submitted": 5, "started": 1, "fallback": 1, "failed": 1}
    assert latest.budgets == () and latest.charges == ()
    assert {(p.state, p.hourly_usd) for p in latest.pending} == {("queued", 3.6), ("running", 7.2)}


def test_a_budget_period_agrees_with_the_summary_and_projects_the_waiting_work(
    store: JobStore,
) -> None:
    budgets = [
        {"name": "team-a", "usd": 10.0, "period_s": HOUR},
        {"name": "P3", "usd": 5.0, "period_s": HOUR},
    ]
    a, b, c, d = submit(
        store,
        item("a"),
        item("b", tier="P3"),
        item("c", account="team-b", tier="P3"),
        item("d"),
        budgets=budgets,
    )
    start = NOW + HOUR - 500  # the runs straddle an hour boundary
    for record in (a, b, c):
        store.report(record.handle, "started", start)
    store.report(c.handle, "succeeded", start + 1000)
    at = NOW + HOUR + 1500
    snapshot = store.snapshot(at)
    periods = {p.name: p for p in budget_periods(snapshot)}
    remaining = store.summary(at).budget_remaining
    for name, period in periods.items():
        assert period.spent_usd == pytest.approx(period.usd - remaining[name])
        assert period.start == NOW + HOUR and period.end == NOW + 2 * HOUR
        assert period.curve[0] == (period.start, 0.0) and period.curve[-1][0] == at
        assert all(x[1] <= y[1] for x, y in zip(period.curve, period.curve[1:], strict=False))
    team_a = periods["team-a"]  # a and b (team-a's, in P1 and P3) paid 1500 s each
    assert team_a.spent_usd == pytest.approx(3.0)
    queued_d = store.get(d.handle, at).predicted_completion
    assert queued_d is not None and queued_d <= team_a.end  # so its planned $2 counts too
    assert team_a.projected_usd == pytest.approx(3.0 + 2.0)  # a and b finish at `at`
    p3 = periods["P3"]  # b until start + 2000 = at; c finished
    assert p3.spent_usd == pytest.approx(1.5 + 0.5) and p3.projected_usd == pytest.approx(2.0)
    assert p3.share_elapsed == pytest.approx(1500 / 3600)


def test_the_spend_curve_has_a_point_at_every_price_change_and_is_thinned() -> None:
    charges = [
        Charge("a", "x", "P1", 0.0, 1800.0, 3.6),
        Charge("b", "x", "P1", 900.0, None, 7.2),
    ]
    curve = spend_curve(charges, 0.0, 3600.0)
    assert [t for t, _ in curve] == [0.0, 900.0, 1800.0, 3600.0]
    assert [v for _, v in curve] == pytest.approx([0.0, 0.9, 0.9 + 0.9 + 1.8, 7.2])
    many = [Charge(str(i), "x", "P1", float(i), float(i) + 0.5, 3600.0) for i in range(1000)]
    thinned = spend_curve(many, 0.0, 1000.0, points=50)
    assert len(thinned) <= 51 and thinned[-1][0] == 1000.0
    assert thinned[-1][1] == pytest.approx(500.0)
