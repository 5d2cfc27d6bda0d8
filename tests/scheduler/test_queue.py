"""The queue: tiers, slack, fair share, dependencies, and admission under hard budget caps.

Prices are the shipped catalog's (AWS us-east-1).
"""

from __future__ import annotations

import pytest

from autofe.scheduler.catalog import Catalog, load_catalog
from autofe.scheduler.fleet import FleetSettings
from autofe.scheduler.jobfile import Budget, JobSet
from autofe.scheduler.jobs import Checkpointing, Estimate, JobRequest, Tier
from autofe.scheduler.policies import Policy, choose_static
from autofe.scheduler.queue import Ledger, priority_key, slack_s, worst_case_usd
from autofe.scheduler.report import JobRecord
from autofe.scheduler.simulate import SimulationSettings, simulate

STATIC = Policy("static", choose_static)
ONE_CLUSTER = SimulationSettings(fleet=FleetSettings(max_nodes=4))


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog().where("aws", "us-east-1")


def _job(
    job_id: str,
    submit: float = 0.0,
    seconds: float = 600.0,
    tier: Tier = "P2",
    account: str = "default",
    deadline: float | None = None,
    depends_on: tuple[str, ...] = (),
    truth: float | None = None,
) -> JobRequest:
    est = Estimate(seconds, seconds * 0.8, seconds * 1.25, truth or seconds)
    return JobRequest(job_id, submit, {"m4.xlarge x4": est}, tier, account, deadline, depends_on)


def _by_id(records: tuple[JobRecord, ...]) -> dict[str, JobRecord]:
    return {r.job_id: r for r in records}


def test_ledger_splits_spend_across_periods_and_refuses_past_the_cap() -> None:
    ledger = Ledger({"a": Budget("a", 10.0, 3600.0)})
    ledger.charge(("a",), 6.0, 1800.0, 5400.0)  # $6/h from 0.5 h to 1.5 h
    assert ledger.spent == {("a", 0): pytest.approx(3.0), ("a", 1): pytest.approx(3.0)}
    assert ledger.headroom(("a",), 4000.0) == pytest.approx(7.0)
    assert ledger.reserve(("a",), 6.5, 4000.0) and not ledger.reserve(("a",), 1.0, 4000.0)
    ledger.release(("a",), 6.5)
    assert ledger.reserve(("a",), 1.0, 4000.0)
    assert ledger.overrun_usd() == 0.0
    ledger.charge(("a",), 36.0, 3600.0, 4800.0)
    assert ledger.overrun_usd() == pytest.approx(3.0 + 12.0 - 10.0)


def test_fair_share_is_the_fraction_of_the_budget_used() -> None:
    ledger = Ledger({"a": Budget("a", 10.0)})
    assert ledger.share("a", {"a": 2.5}) == 0.25 and ledger.share("b", {"b": 2.5}) == 2.5


def test_worst_case_grows_with_preemptions_and_work() -> None:
    base = worst_case_usd(3600.0, 0.86, 300.0, None)
    assert base == pytest.approx(0.86 * 3900 / 3600)
    assert worst_case_usd(3600.0, 0.86, 300.0, None, 2) == pytest.approx(3 * base)
    ckpt = Checkpointing(600.0, 10.0, 60.0)
    restarts = worst_case_usd(3600.0, 0.86, 300.0, ckpt, 2) - worst_case_usd(
        3600.0, 0.86, 300.0, ckpt
    )
    assert restarts == pytest.approx(2 * 0.86 * (300 + 60 + 610) / 3600)
    assert worst_case_usd(7200.0, 0.86, 300.0, None) > base


def test_urgent_jobs_go_first_within_a_tier_and_tiers_always_first() -> None:
    now, work = 0.0, 1000.0
    tight = _job("tight", deadline=1500.0, account="busy")
    loose = _job("loose", deadline=90000.0, account="idle")
    p1 = _job("p1", tier="P1", deadline=90000.0)
    keys = {
        j.job_id: priority_key(j, now, work, 0.9 if j.account == "busy" else 0.1)
        for j in (tight, loose, p1)
    }
    assert sorted(keys, key=keys.__getitem__) == ["p1", "tight", "loose"]
    assert slack_s(tight, now, work) == 500.0


def test_a_p0_job_does_not_wait_behind_lower_tiers(catalog: Catalog) -> None:
    # one cluster's worth of nodes: a P3 job runs; a P1 and then a P0 job arrive and queue
    jobs = (
        _job("p3", 0.0, 1800.0, "P3"),
        _job("p1", 10.0, 600.0, "P1"),
        _job("p0", 20.0, 600.0, "P0"),
    )
    result = _by_id(simulate(JobSet(jobs), catalog, STATIC, ONE_CLUSTER).jobs)
    assert result["p0"].first_start == result["p3"].end
    assert result["p1"].first_start == result["p0"].end
    fifo = Policy("fifo", choose_static, order="fifo")
    by_arrival = _by_id(simulate(JobSet(jobs), catalog, fifo, ONE_CLUSTER).jobs)
    assert by_arrival["p1"].first_start == by_arrival["p3"].end


def test_accounts_take_turns_by_fair_share(catalog: Catalog) -> None:
    jobs = [_job(f"a{i}", 0.0, 600.0, account="a") for i in range(3)]
    jobs += [_job(f"b{i}", 1.0, 600.0, account="b") for i in range(3)]
    result = simulate(JobSet(tuple(jobs)), catalog, STATIC, ONE_CLUSTER)
    order = [r.job_id[0] for r in sorted(result.jobs, key=lambda r: r.first_start or 0.0)]
    assert order == ["a", "b", "a", "b", "a", "b"]


def test_dependencies_run_in_order_and_a_failed_one_cancels_its_dependents(
    catalog: Catalog,
) -> None:
    jobs = (
        _job("extract", 0.0, 600.0, account="team"),
        _job("transform", 0.0, 3600.0, account="team", depends_on=("extract",)),
        _job("report", 0.0, 600.0, account="team", depends_on=("transform",)),
    )
    ok = _by_id(simulate(JobSet(jobs), catalog, STATIC).jobs)
    assert ok["transform"].first_start == ok["extract"].end
    assert ok["report"].first_start == ok["transform"].end
    assert ok["transform"].ready_at == ok["extract"].end
    # a cap below transform's worst case: extract runs, transform is held for good
    one = worst_case_usd(750.0, 0.86, 300.0, None) * 1.5
    assert one < worst_case_usd(4500.0, 0.86, 300.0, None)
    capped = JobSet(jobs, (Budget("team", one, 10 * 86400.0),))
    result = simulate(capped, catalog, STATIC)
    by_id = _by_id(result.jobs)
    assert by_id["extract"].status == "done" and by_id["transform"].status == "held"
    assert by_id["report"].status == "cancelled" and by_id["report"].first_start is None
    assert result.summary.budget_overrun_usd == 0.0


def test_a_job_is_held_until_the_next_budget_period(catalog: Catalog) -> None:
    worst = worst_case_usd(750.0, 0.86, 300.0, None)
    jobs = (_job("a", 0.0, 600.0, "P1", "t"), _job("b", 0.0, 600.0, "P1", "t"))
    capped = JobSet(jobs, (Budget("t", worst * 1.5, 3600.0),))
    result = simulate(capped, catalog, STATIC)
    by_id = _by_id(result.jobs)
    assert by_id["a"].first_start == 0.0 and by_id["b"].first_start == 3600.0
    assert result.summary.budget_holds == 1 and result.summary.budget_overrun_usd == 0.0
    assert max(result.spend_by_budget.values()) <= worst * 1.5


def test_low_tiers_move_to_spot_and_yield_to_higher_tiers_near_the_cap(catalog: Catalog) -> None:
    worst = worst_case_usd(750.0, 0.86, 300.0, None)
    jobs = (
        _job("p0", 0.0, 600.0, "P0", account="t"),
        _job("p1", 0.0, 600.0, "P1", account="t"),
        _job("p3", 0.0, 600.0, "P3", account="t"),
    )
    # room for about 1.6 on-demand worst cases: p0 runs, p1 is held, p3 may not take p1's
    # share on demand but fits on spot only if p1's expected cost still fits beside it
    budget = Budget("t", worst * 1.6, 86400.0)
    result = simulate(JobSet(jobs, (budget,)), catalog, STATIC)
    by_id = _by_id(result.jobs)
    assert by_id["p0"].first_start == 0.0
    assert (by_id["p1"].first_start or 0.0) > 0.0
    assert (by_id["p3"].first_start or 0.0) >= (by_id["p1"].first_start or 0.0)
    assert result.summary.budget_overrun_usd == 0.0
    # alone with the cap, p3 is moved to spot instead of waiting
    alone = simulate(
        JobSet((_job("p0", 0.0, 600.0, "P0", account="t"), jobs[2]), (budget,)), catalog, STATIC
    )
    moved = _by_id(alone.jobs)["p3"]
    assert moved.first_start == 0.0 and moved.placement.endswith("spot")
    assert [e.kind for e in alone.log if e.job_id == "p3"].count("to-spot") == 1


def test_a_run_that_would_cross_its_cap_is_stopped(catalog: Catalog) -> None:
    # predicted 10 min, truly 3 h: each time its reservation runs out it reserves the
    # re-estimated rest, until that no longer fits under the cap and it is stopped
    long = _job("long", 0.0, 600.0, account="t", truth=3 * 3600.0)
    budget = Budget("t", 1.0, 86400.0)
    result = simulate(JobSet((long,), (budget,)), catalog, STATIC)
    record = result.jobs[0]
    assert record.status == "stopped" and result.summary.budget_stops == 1
    assert 0.0 < record.cost_usd <= 1.0 and result.spend_by_budget["t"] <= 1.0 + 1e-9
    assert [e.kind for e in result.log][-1] == "stop"
    off = simulate(
        JobSet((long,), (budget,)), catalog, STATIC, SimulationSettings(budget_mode="off")
    )
    assert off.jobs[0].status == "done" and off.summary.budget_overrun_usd > 0
