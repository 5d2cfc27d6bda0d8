"""Each policy's choice on one job over the shipped catalog's real AWS us-east-1 prices, and
every policy run on the same small trace.

The expected choices are derived from the catalog's prices in the test, not copied numbers.
"""

from __future__ import annotations

import pytest

from autofe.errors import ScheduleError
from autofe.scheduler.catalog import Catalog, load_catalog
from autofe.scheduler.jobfile import JobSet
from autofe.scheduler.jobs import Estimate, JobRequest, Shape
from autofe.scheduler.plan import PlanSettings, plan_job
from autofe.scheduler.policies import (
    POLICIES,
    ChoiceContext,
    choose_fifo_worst,
    choose_greedy,
    choose_known,
    choose_planned,
    choose_spot_only,
    choose_static,
    get_policy,
)
from autofe.scheduler.simulate import SimulationSettings, simulate
from autofe.scheduler.simulate_world import seen_job

SHAPES = {
    # key: (p50, low, high, true)
    "m4.xlarge x2": (4000.0, 3200.0, 5200.0, 4300.0),
    "m4.xlarge x4": (2100.0, 1700.0, 2800.0, 2200.0),
    "c4.xlarge x8": (1200.0, 900.0, 2400.0, 1100.0),
    "m4.2xlarge x8": (700.0, 600.0, 900.0, 2500.0),
}


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog().where("aws", "us-east-1")


@pytest.fixture(scope="module")
def ctx(catalog: Catalog) -> ChoiceContext:
    return ChoiceContext(catalog, startup_s=300.0)


def _job(deadline: float | None = None) -> JobRequest:
    shapes = {k: Estimate(*v) for k, v in SHAPES.items()}
    return JobRequest("j", 0.0, shapes, tier="P1", deadline=deadline)


def _hourly(catalog: Catalog, key: str, market: str) -> float:
    shape = Shape.parse(key)
    offer = catalog.cheapest_offer(shape.instance_type, market)  # type: ignore[arg-type]
    assert offer is not None
    return (offer.price(market) or 0.0) * shape.nodes  # type: ignore[arg-type]


def test_static_takes_the_lower_median_priced_shape_on_demand(
    catalog: Catalog, ctx: ChoiceContext
) -> None:
    by_price = sorted(SHAPES, key=lambda k: _hourly(catalog, k, "on-demand"))
    chosen = choose_static(_job(), 0.0, ctx)
    assert chosen.shape.key == by_price[1] and chosen.market == "on-demand"


def test_spot_only_takes_the_cheapest_median_run_on_spot(
    catalog: Catalog, ctx: ChoiceContext
) -> None:
    cheapest = min(SHAPES, key=lambda k: _hourly(catalog, k, "spot") * (300 + SHAPES[k][0]))
    chosen = choose_spot_only(_job(), 0.0, ctx)
    assert (chosen.shape.key, chosen.market, chosen.fallback_after) == (cheapest, "spot", None)


def test_greedy_takes_the_cheapest_spot_run_meeting_the_deadline_by_its_median(
    catalog: Catalog, ctx: ChoiceContext
) -> None:
    deadline = 300.0 + 1500.0
    fits = [k for k in SHAPES if SHAPES[k][0] + 300.0 <= deadline]
    cheapest = min(fits, key=lambda k: _hourly(catalog, k, "spot") * (300 + SHAPES[k][0]))
    chosen = choose_greedy(_job(deadline), 0.0, ctx)
    assert (chosen.shape.key, chosen.market, chosen.fallback_after) == (cheapest, "spot", 1)
    hopeless = choose_greedy(_job(400.0), 0.0, ctx)
    fastest = min(SHAPES, key=lambda k: SHAPES[k][0])
    assert (hopeless.shape.key, hopeless.market) == (fastest, "on-demand")


def test_fifo_worst_takes_the_fastest_shape_by_its_high_estimate(ctx: ChoiceContext) -> None:
    chosen = choose_fifo_worst(_job(), 0.0, ctx)
    fastest_high = min(SHAPES, key=lambda k: SHAPES[k][2])
    assert (chosen.shape.key, chosen.market) == (fastest_high, "on-demand")
    assert POLICIES["fifo-worst"].order == "fifo"


def test_the_oracle_sees_true_runtimes(catalog: Catalog, ctx: ChoiceContext) -> None:
    # the model thinks m4.2xlarge x8 is fastest; truly it is c4.xlarge x8
    job = _job(deadline=300.0 + 1300.0)
    truth = seen_job(job, SimulationSettings(), truth=True)
    assert {k: e.p50_s for k, e in truth.shapes.items()} == {k: v[3] for k, v in SHAPES.items()}
    chosen = choose_known(truth, 0.0, ctx)
    assert chosen.shape.key == "c4.xlarge x8"
    assert POLICIES["oracle"].sees_truth and not POLICIES["autofe"].sees_truth


def test_autofe_is_the_planners_choice(catalog: Catalog, ctx: ChoiceContext) -> None:
    job = _job(deadline=3600.0)
    expected = plan_job(job, catalog, 0.0, PlanSettings(startup_s=300.0, fallback_after=2))
    assert choose_planned(job, 0.0, ctx) == expected.placement


def test_every_baseline_is_registered_and_unknown_names_are_errors() -> None:
    assert set(POLICIES) == {"autofe", "static", "spot-only", "greedy", "fifo-worst", "oracle"}
    assert get_policy("greedy") is POLICIES["greedy"]
    with pytest.raises(ScheduleError, match="unknown policy 'cheap'; known: autofe"):
        get_policy("cheap")


def test_every_policy_runs_the_same_trace(catalog: Catalog) -> None:
    jobs = tuple(
        JobRequest(
            f"j{i}",
            i * 900.0,
            {k: Estimate(*v) for k, v in SHAPES.items()},
            tier=("P0", "P1", "P2", "P3")[i % 4],
            deadline=i * 900.0 + 9000.0,
        )
        for i in range(8)
    )
    results = {name: simulate(JobSet(jobs), catalog, name) for name in POLICIES}
    for name, result in results.items():
        assert result.policy == name and result.summary.done == 8, name
    static = results["static"].summary.total_cost_usd
    assert results["autofe"].summary.total_cost_usd < static
    assert results["oracle"].summary.attainment == 1.0
