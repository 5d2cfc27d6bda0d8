"""The cost gate on the shipped example: a quadratic feature is refused with its projected
cost, its window-and-ASOF rewrite (the same values) is admitted, and the verdict is counted
in rows, not seconds."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from autofe.featurespec import FeatureSpec
from autofe.gates import GATES, GateContext, run_gates
from autofe.gates.codes import Cost
from autofe.gates.cost import check_cost
from autofe.gates.cost_sample import cost_samples
from autofe.sandbox.session import Sandbox

EVERY_EARLIER_RUN = """
SELECT t.run_id, count(e.run_id) AS value
FROM runs AS t
LEFT JOIN runs AS e ON e.end_time < t.submit_time
GROUP BY t.run_id
"""
"""How many runs of any job had ended before this one was submitted: every run joined with
every earlier one, so its work grows with the square of the history."""

WINDOW_REWRITE = """
WITH ended AS (
  SELECT end_time,
    count(*) OVER (ORDER BY end_time RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS n
  FROM runs
  WHERE end_time IS NOT NULL
)
SELECT t.run_id, coalesce(e.n, 0) AS value
FROM runs AS t
ASOF LEFT JOIN ended AS e ON e.end_time < t.submit_time
"""
"""The same count as a running count over the runs ordered by end time, looked up with an
``ASOF`` join at the submit time: a sort and a merge, ``n log n``."""


LAST_OF_ITS_JOB = """
SELECT t.run_id,
  (SELECT h.duration_s FROM runs AS h
    WHERE h.job_id = t.job_id AND h.end_time < t.submit_time
    ORDER BY h.end_time DESC, h.run_id DESC LIMIT 1) AS value
FROM runs AS t
"""
"""The duration of the job's latest run that ended before this one's submission, by a
correlated subquery: linear in the jobs, quadratic in each job's history."""

LAST_OF_ITS_JOB_REWRITE = """
WITH ranked AS (
  SELECT h.job_id, h.end_time, h.duration_s,
    row_number() OVER (PARTITION BY h.job_id ORDER BY h.end_time, h.run_id) AS rank,
    count(*) OVER (
      PARTITION BY h.job_id ORDER BY h.end_time RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
    ) AS ended
  FROM runs AS h
  WHERE h.end_time IS NOT NULL
),
seen AS (
  SELECT t.run_id, t.job_id, t.submit_time, r.ended
  FROM runs AS t
  ASOF JOIN ranked AS r ON r.job_id = t.job_id AND r.end_time < t.submit_time
)
SELECT t.run_id, r.duration_s AS value
FROM runs AS t
LEFT JOIN seen AS s ON s.run_id = t.run_id
LEFT JOIN ranked AS r
  ON r.job_id = s.job_id AND r.rank = s.ended AND r.end_time < s.submit_time
"""
"""The same value: the job's ended runs ranked, how many had ended at the submission by an
``ASOF`` join, that rank looked up by equality."""


def _spec(sql: str) -> FeatureSpec:
    return FeatureSpec(name="ended_before", sql=sql, category="history", value_type="BIGINT")


@pytest.fixture(scope="module")
def ctx(example_warehouse: Path) -> GateContext:
    return GateContext.load(example_warehouse)


def test_cost_is_a_gate() -> None:
    assert check_cost in GATES


def test_rewrite_has_the_quadratic_features_values(example_warehouse: Path) -> None:
    with Sandbox.open(example_warehouse) as box:
        quadratic = dict(box.query(EVERY_EARLIER_RUN).rows)
        linear = dict(box.query(WINDOW_REWRITE).rows)
    assert len(quadratic) == 490
    assert linear == quadratic
    assert len(set(quadratic.values())) > 100  # a real count, not a constant


def test_quadratic_feature_is_refused_with_its_projected_cost(ctx: GateContext) -> None:
    reasons = check_cost(_spec(EVERY_EARLIER_RUN), ctx)
    assert [r.code for r in reasons] == [str(Cost.SUPERLINEAR)]
    message = reasons[0].message
    assert message.startswith("grows as n^2.")
    assert "at 490 runs" in message and "at 4,900" in message
    assert "window over ordered runs" in message


def test_window_rewrite_passes_every_gate(ctx: GateContext) -> None:
    assert check_cost(_spec(WINDOW_REWRITE), ctx) == []
    verdict = run_gates(_spec(WINDOW_REWRITE), ctx)
    assert verdict.accepted, verdict.reasons
    assert "cost" in verdict.seconds
    refused = run_gates(_spec(EVERY_EARLIER_RUN), ctx)
    assert [r.gate for r in refused.reasons] == ["cost"]


def test_quadratic_in_each_jobs_history_is_refused(
    ctx: GateContext, example_warehouse: Path
) -> None:
    """Job samples grow the jobs, not their histories: the depth sample sees the square."""
    with Sandbox.open(example_warehouse) as box:
        before = dict(box.query(LAST_OF_ITS_JOB).rows)
        after = dict(box.query(LAST_OF_ITS_JOB_REWRITE).rows)
    assert after == before and sum(v is not None for v in before.values()) > 400
    reasons = check_cost(_spec(LAST_OF_ITS_JOB), ctx)
    assert [r.code for r in reasons] == [str(Cost.SUPERLINEAR)]
    assert "with the history of each job" in reasons[0].message
    assert check_cost(_spec(LAST_OF_ITS_JOB_REWRITE), ctx) == []


def test_projection_over_the_budget_is_refused(ctx: GateContext) -> None:
    tight = GateContext(ctx.db, ctx.catalog, replace(ctx.settings, feature_budget_s=1e-6))
    reasons = check_cost(_spec(WINDOW_REWRITE), tight)
    assert [r.code for r in reasons] == [str(Cost.OVER_BUDGET)]
    assert "exceeds the feature budget of 0 ms" in reasons[0].message
    far = GateContext(ctx.db, ctx.catalog, replace(ctx.settings, cost_horizon=1e6))
    assert str(Cost.OVER_BUDGET) in [r.code for r in check_cost(_spec(EVERY_EARLIER_RUN), far)]


def test_samples_are_nested_whole_jobs(ctx: GateContext) -> None:
    s = ctx.settings
    samples = cost_samples(ctx.db, ctx.catalog, s.cost_sample_shares, s.cost_sample_cap, s.limits)
    small, large = samples.samples
    assert samples.warehouse_runs == 490
    assert 49 <= small.runs < large.runs and large.runs >= 196
    jobs = "SELECT DISTINCT job_id FROM runs"
    small_jobs = {r[0] for r in small.sandbox.query(jobs).rows}
    large_jobs = {r[0] for r in large.sandbox.query(jobs).rows}
    assert small_jobs < large_jobs
    with Sandbox.open(ctx.db) as box:
        per_job = dict(box.query("SELECT job_id, count(*) FROM runs GROUP BY 1").rows)
    assert small.runs == sum(per_job[j] for j in small_jobs)  # every run of a sampled job
    stages = "SELECT count(*) FROM stages WHERE run_id NOT IN (SELECT run_id FROM runs)"
    assert large.sandbox.query(stages).rows == [(0,)]
    # the depth sample: the large sample's jobs, their first runs, a quarter of them
    assert samples.depth is not None and samples.depth.runs == round(large.runs / 4)
    depth_jobs = {r[0] for r in samples.depth.sandbox.query(jobs).rows}
    assert depth_jobs <= large_jobs and len(depth_jobs) > len(small_jobs)
    last = "SELECT max(submit_time) FROM runs"
    cut = samples.depth.sandbox.query(last).rows[0][0]
    later = f"SELECT count(*) FROM runs WHERE submit_time < TIMESTAMP '{cut}'"
    assert large.sandbox.query(later).rows[0][0] < samples.depth.runs  # the earliest ones


def test_same_verdict_twice(ctx: GateContext) -> None:
    first = check_cost(_spec(EVERY_EARLIER_RUN), ctx)
    assert check_cost(_spec(EVERY_EARLIER_RUN), ctx) == first


def test_unrunnable_sql_is_left_to_completeness(ctx: GateContext) -> None:
    assert check_cost(_spec("SELECT run_id, no_such_column AS value FROM runs"), ctx) == []


def test_on_a_sample_the_projection_is_to_the_whole_history(ctx: GateContext) -> None:
    """The loop gates on a sample of a larger history (``history_runs``): the reason projects
    to that history and ten times it, not to the sample's size."""
    tight = replace(ctx.settings, feature_budget_s=1e-6)
    own = check_cost(_spec(WINDOW_REWRITE), GateContext(ctx.db, ctx.catalog, tight))
    assert "at 490 runs" in own[0].message and "at 4,900" in own[0].message
    sampled = replace(tight, history_runs=1_000_000)
    reasons = check_cost(_spec(WINDOW_REWRITE), GateContext(ctx.db, ctx.catalog, sampled))
    assert "at 1,000,000 runs" in reasons[0].message and "at 10,000,000" in reasons[0].message
