"""Fleet capacity: node limits queue jobs, warm clusters batch short jobs, idle ones scale to zero.

Prices are the shipped catalog's (AWS us-east-1, 2017 on-demand, Spot Advisor spot).
"""

from __future__ import annotations

import itertools

import pytest

from autofe.errors import ConfigError
from autofe.scheduler.catalog import Catalog, load_catalog
from autofe.scheduler.fleet import (
    FleetSettings,
    WarmChoice,
    WarmCluster,
    fits,
    idle_reservation_usd,
    idle_timeout,
    pick_warm,
    room_from_idle,
    worth_keeping,
)
from autofe.scheduler.jobfile import JobSet
from autofe.scheduler.jobs import Estimate, JobRequest, Placement, Shape
from autofe.scheduler.policies import Policy, choose_static
from autofe.scheduler.simulate import SimulationSettings, simulate

STATIC = Policy("static", choose_static)
WARM_STATIC = Policy("warm-static", choose_static, keeps_warm=True)


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog().where("aws", "us-east-1")


def _job(job_id: str, submit: float, seconds: float, shape: str = "m4.xlarge x2") -> JobRequest:
    return JobRequest(
        job_id, submit, {shape: Estimate(seconds, seconds * 0.8, seconds * 1.3, seconds)}
    )


def _warm(nodes: int, since: float, name: str = "") -> WarmCluster:
    place = Placement(Shape("m4.xlarge", nodes), "aws", "us-east-1", "on-demand")
    return WarmCluster(place, 0.215 * nodes, since, name)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_nodes": 0},
        {"min_nodes": 5, "max_nodes": 4},
        {"idle_timeout_s": -1.0},
        {"min_nodes": 2},
    ],
)
def test_bad_fleet_settings_are_config_errors(kwargs: dict[str, float]) -> None:
    with pytest.raises(ConfigError, match="fleet"):
        FleetSettings(**kwargs)  # type: ignore[arg-type]


def test_room_is_made_from_the_oldest_idle_clusters_first() -> None:
    fleet = FleetSettings(max_nodes=10)
    idle = [_warm(2, 50.0, "young"), _warm(4, 10.0, "old"), _warm(2, 30.0, "mid")]
    assert not fits(6, 8, fleet)
    released = room_from_idle(6, 8, idle, fleet)
    assert released is not None and [c.name for c in released] == ["old"]
    assert room_from_idle(3, 8, idle, fleet) == [idle[1]]
    assert room_from_idle(11, 8, idle, fleet) is None


def test_a_warm_cluster_is_taken_only_when_cheaper_and_in_time() -> None:
    cluster = _warm(2, 0.0)
    short = WarmChoice(cluster, Estimate(120.0, 100.0, 150.0))
    # own cluster: start-up 300 s + 120 s of work on the same shape
    own = 0.43 * 420 / 3600
    assert pick_warm([short], own, now=0.0, deadline=1000.0) is cluster
    assert pick_warm([short], own, now=0.0, deadline=140.0) is None  # high end is late
    long = WarmChoice(cluster, Estimate(7200.0, 6000.0, 9000.0))
    assert pick_warm([long], 0.43 * 3600 / 3600, now=0.0, deadline=None) is None


def test_idle_reservation_prices_one_timeout() -> None:
    assert idle_reservation_usd(0.86, FleetSettings(idle_timeout_s=3600)) == pytest.approx(0.86)
    assert idle_reservation_usd(0.86, FleetSettings()) == 0.0


def test_a_node_limit_queues_the_second_job_until_the_first_ends(catalog: Catalog) -> None:
    jobs = JobSet((_job("a", 0.0, 1800.0, "m4.xlarge x4"), _job("b", 0.0, 600.0, "m4.xlarge x4")))
    limited = SimulationSettings(fleet=FleetSettings(max_nodes=6))
    result = simulate(jobs, catalog, STATIC, limited)
    a, b = result.jobs
    assert a.first_start == 0.0 and b.first_start == a.end
    assert result.summary.avg_queue_s == pytest.approx((a.end or 0.0) / 2)
    free = simulate(jobs, catalog, STATIC).jobs
    assert [r.first_start for r in free] == [0.0, 0.0]


def test_short_jobs_batch_onto_a_warm_cluster_and_it_costs_less(catalog: Catalog) -> None:
    # a 120 s job every 150 s: with a 600 s idle timeout, freed clusters wait (paid) for the
    # next arrival instead of every job paying a 300 s start-up of its own
    jobs = JobSet(tuple(_job(f"s{i}", i * 150.0, 120.0) for i in range(12)))
    cold = simulate(jobs, catalog, STATIC)
    kept = SimulationSettings(fleet=FleetSettings(idle_timeout_s=600))
    warm = simulate(jobs, catalog, STATIC, kept)
    assert cold.summary.batched == 0 and warm.summary.batched >= 6
    assert warm.summary.idle_cost_usd > 0
    assert warm.summary.total_cost_usd < cold.summary.total_cost_usd
    batched = [r for r in warm.jobs if r.batched]
    assert all((r.end or 0) - (r.first_start or 0) == pytest.approx(120.0) for r in batched)


def test_an_unused_warm_cluster_scales_to_zero_after_its_timeout(catalog: Catalog) -> None:
    hourly = catalog.offers("m4.xlarge")[0].on_demand_usd_h * 2
    jobs = JobSet((_job("a", 0.0, 600.0),))
    result = simulate(
        jobs, catalog, STATIC, SimulationSettings(fleet=FleetSettings(idle_timeout_s=900))
    )
    assert result.summary.idle_cost_usd == pytest.approx(hourly * 900 / 3600)
    assert result.jobs[0].cost_usd == pytest.approx(hourly * (300 + 600) / 3600)


def test_min_nodes_stay_warm_while_work_remains(catalog: Catalog) -> None:
    # b arrives long after a's cluster would have timed out; min_nodes keeps it for b
    jobs = JobSet((_job("a", 0.0, 600.0), _job("b", 5000.0, 600.0)))
    kept = FleetSettings(min_nodes=2, idle_timeout_s=600)
    result = simulate(jobs, catalog, STATIC, SimulationSettings(fleet=kept))
    assert result.jobs[1].batched == 1 and result.jobs[1].end == pytest.approx(5600.0)
    dropped = simulate(
        jobs, catalog, STATIC, SimulationSettings(fleet=FleetSettings(idle_timeout_s=600))
    )
    assert dropped.jobs[1].batched == 0 and dropped.jobs[1].end == pytest.approx(5900.0)


def test_a_warm_pool_idles_for_a_start_up_and_only_when_jobs_come_faster_than_start_ups() -> None:
    assert idle_timeout(FleetSettings(), keeps_warm=True, startup_s=300.0) == 300.0
    assert idle_timeout(FleetSettings(), keeps_warm=False, startup_s=300.0) == 0.0
    assert idle_timeout(FleetSettings(idle_timeout_s=60.0), keeps_warm=False, startup_s=300.0) == 60
    # 12 jobs an hour that would batch: one per 300 s, no better than a start-up each
    assert not worth_keeping(12, 3600.0, 300.0) and worth_keeping(12.5, 3600.0, 300.0)


def test_the_planner_batches_short_jobs_by_default_and_static_gives_each_its_own_cluster(
    catalog: Catalog,
) -> None:
    # a 40 s job every 60 s (the lab's regime: runs far shorter than the 300 s start-up)
    jobs = JobSet(
        tuple(
            JobRequest(
                f"s{i}",
                i * 60.0,
                {"m4.xlarge x2": Estimate(40, 32, 52, 40.0)},
                deadline=i * 60.0 + 1200.0,
            )
            for i in range(20)
        )
    )
    planned = simulate(jobs, catalog, "autofe")
    static = simulate(jobs, catalog, "static")
    assert planned == simulate(jobs, catalog, "autofe")  # deterministic
    s = planned.summary
    assert s.batched >= 10 and s.idle_cost_usd > 0 and s.attainment == 1.0
    assert s.total_cost_usd == pytest.approx(
        sum(r.cost_usd for r in planned.jobs) + s.idle_cost_usd
    )
    assert s.total_cost_usd < static.summary.total_cost_usd
    assert static.summary.batched == 0 and static.summary.idle_cost_usd == 0.0
    for r in planned.jobs:  # never waits for a warm cluster; batched runs skip the start-up
        assert r.first_start == r.ready_at
        assert (r.end or 0) - (r.first_start or 0) == pytest.approx(40.0 if r.batched else 340.0)


def test_idle_node_time_of_the_default_pool_is_charged_in_full(catalog: Catalog) -> None:
    # a, b, c end at 360 s; d arrives at 400 s. At 360 s, 3 jobs in 360 s would batch: a's
    # cluster is kept (3 x 300 > 360), b's too (each job shared with a's: 1.5 x 300 > 360), c's
    # not (1 x 300). d takes one at 400 s (40 s idle); the other idles its 300 s timeout; d's
    # is kept at 460 s (4 jobs shared with one idle: 2 x 300 > 460) and idles 300 s.
    jobs = JobSet((*(_job(n, 0.0, 60.0) for n in "abc"), _job("d", 400.0, 60.0)))
    hourly = catalog.offers("m4.xlarge")[0].on_demand_usd_h * 2
    result = simulate(jobs, catalog, WARM_STATIC)
    assert [r.batched for r in result.jobs] == [0, 0, 0, 1]
    assert result.summary.idle_cost_usd == pytest.approx(hourly * (40 + 300 + 300) / 3600)
    assert result.jobs[3].cost_usd == pytest.approx(hourly * 60 / 3600)


def test_a_warm_pool_stays_within_the_node_limit(catalog: Catalog) -> None:
    jobs = JobSet(tuple(_job(f"s{i}", i * 30.0, 40.0) for i in range(10)))
    result = simulate(
        jobs, catalog, WARM_STATIC, SimulationSettings(fleet=FleetSettings(max_nodes=2))
    )
    spans = sorted((r.first_start or 0.0, r.end or 0.0) for r in result.jobs)
    assert result.summary.done == 10 and result.summary.batched > 0
    assert all(end <= nxt + 1e-9 for (_, end), (nxt, _) in itertools.pairwise(spans))
