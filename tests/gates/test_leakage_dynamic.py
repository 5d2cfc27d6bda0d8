"""The dynamic (perturbation) leakage check on the real gates warehouse.

Which leaks the check can see depends on the data: the fixture warehouse has no two ended
runs of one job that overlap in time. What it has instead is runs submitted at the same
instant (the same Spark application logged twice) and runs that never ended (logs without an
ApplicationEnd), and both are where "the previous run's duration" leaks; the first test pins
that down so the targets tested below keep meaning what they say.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import time
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb
import pytest
import sqlglot
from sqlglot import exp

from autofe.config import IngestSettings
from autofe.errors import SandboxViolation
from autofe.featurespec import FeatureSpec
from autofe.gates.codes import Leakage
from autofe.gates.context import GateContext, GateSettings
from autofe.gates.leakage import check_leakage
from autofe.gates.leakage_dynamic import (
    CANDIDATES_SQL,
    SITUATIONS,
    check_dynamic_leakage,
    pick_cutoffs,
)
from autofe.gates.world import (
    BASELINE,
    SOURCE,
    Variant,
    World,
    build_worlds,
    in_world,
    open_scratch,
    world_catalog,
)
from autofe.ingest.ingest import ingest
from autofe.sandbox.session import LimitExceeded, Sandbox

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def ctx(gates_warehouse: Path) -> GateContext:
    return GateContext.load(gates_warehouse)


def spec(sql: str) -> FeatureSpec:
    return FeatureSpec(name="f", sql=sql, category="history")


def rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_fixture_warehouse_overlaps_are_ties_and_unended_runs(gates_warehouse: Path) -> None:
    pair = """
        SELECT count(*) FROM runs AS a JOIN runs AS b
          ON a.job_id = b.job_id AND a.run_id <> b.run_id AND {}
    """
    ended_overlap = "a.submit_time < b.submit_time AND b.submit_time < a.end_time"
    tied = "a.submit_time = b.submit_time"
    unended_before = "a.submit_time < b.submit_time AND a.end_time IS NULL"
    assert rows(gates_warehouse, pair.format(ended_overlap)) == [(0,)]
    assert rows(gates_warehouse, pair.format(tied))[0][0] > 0
    assert rows(gates_warehouse, pair.format(unended_before))[0][0] > 0


LEAKY = {
    # Ties in submit order: the twin ordered first had not ended when the other was submitted.
    "lag_over_tied_submits": """
        SELECT run_id,
          LAG(duration_s) OVER (PARTITION BY job_id ORDER BY submit_time, run_id) AS value
        FROM runs
    """,
    # A run submitted earlier that never ended (Databricks Shell) has no label to read yet.
    "previous_submitted_duration": """
        SELECT t.run_id, (
            SELECT h.duration_s FROM runs AS h
            WHERE h.job_id = t.job_id AND h.submit_time < t.submit_time
            ORDER BY h.submit_time DESC, h.run_id DESC LIMIT 1
        ) AS value
        FROM runs AS t
    """,
    # Only deleting the run's own stages shows this: altering keeps the count.
    "own_stage_count": """
        SELECT r.run_id, count(s.stage_id)::DOUBLE AS value
        FROM runs AS r LEFT JOIN stages AS s ON s.run_id = r.run_id
        GROUP BY r.run_id
    """,
    "own_task_time": """
        SELECT r.run_id, sum(s.task_duration_sum_ms)::DOUBLE AS value
        FROM runs AS r LEFT JOIN stages AS s ON s.run_id = r.run_id
        GROUP BY r.run_id
    """,
    "later_runs": """
        SELECT t.run_id, count(h.run_id)::DOUBLE AS value
        FROM runs AS t
        LEFT JOIN runs AS h ON h.job_id = t.job_id AND h.submit_time > t.submit_time
        GROUP BY t.run_id
    """,
    "latest_snapshot_unbounded": """
        SELECT run_id, (
            SELECT bytes FROM table_stats WHERE table_name = 'sales.orders_raw'
            ORDER BY as_of DESC LIMIT 1
        )::DOUBLE AS value
        FROM runs
    """,
    # The first run of a job falls back to its own label.
    "own_label_fallback": """
        SELECT t.run_id, COALESCE((
            SELECT h.duration_s FROM runs AS h
            WHERE h.job_id = t.job_id AND h.end_time < t.submit_time
            ORDER BY h.end_time DESC, h.run_id DESC LIMIT 1
        ), t.duration_s) AS value
        FROM runs AS t
    """,
    # Statuses of runs submitted before but still running: text values flip in the worlds.
    "failure_rate_of_running_runs": """
        SELECT t.run_id, avg((h.status = 'FAILED')::INT)::DOUBLE AS value
        FROM runs AS t
        JOIN runs AS h ON h.job_id = t.job_id AND h.submit_time < t.submit_time
        GROUP BY t.run_id
    """,
    "own_post_execution_attribute": """
        SELECT run_id, value FROM run_attributes
        WHERE name = 'setup_duration_s' AND availability = 'post_execution'
    """,
    # Nearest run in time, either side: static rules see only an ORDER BY on a distance.
    "nearest_run_duration": """
        SELECT t.run_id, (
            SELECT h.duration_s FROM runs AS h
            WHERE h.job_id = t.job_id AND h.run_id <> t.run_id
            ORDER BY abs(epoch(h.submit_time) - epoch(t.submit_time)), h.run_id LIMIT 1
        ) AS value
        FROM runs AS t
    """,
}

CLEAN = {
    "last_ended_duration": """
        SELECT t.run_id, (
            SELECT h.duration_s FROM runs AS h
            WHERE h.job_id = t.job_id AND h.end_time < t.submit_time
            ORDER BY h.end_time DESC, h.run_id DESC LIMIT 1
        ) AS value
        FROM runs AS t
    """,
    "earlier_submitted_runs": """
        SELECT t.run_id, count(h.run_id)::DOUBLE AS value
        FROM runs AS t
        LEFT JOIN runs AS h ON h.job_id = t.job_id AND h.submit_time < t.submit_time
        GROUP BY t.run_id
    """,
    "mean_of_last_five_ended": """
        WITH hist AS (
            SELECT t.run_id, h.duration_s, row_number() OVER (
                PARTITION BY t.run_id ORDER BY h.end_time DESC, h.run_id DESC) AS k
            FROM runs AS t JOIN runs AS h ON h.job_id = t.job_id AND h.end_time < t.submit_time
        )
        SELECT t.run_id, avg(hist.duration_s) AS value
        FROM runs AS t LEFT JOIN hist ON hist.run_id = t.run_id AND hist.k <= 5
        GROUP BY t.run_id
    """,
    "stages_of_the_last_ended_run": """
        WITH prev AS (
            SELECT t.run_id, (
                SELECT h.run_id FROM runs AS h
                WHERE h.job_id = t.job_id AND h.end_time < t.submit_time
                ORDER BY h.end_time DESC, h.run_id DESC LIMIT 1
            ) AS prev_id
            FROM runs AS t
        )
        SELECT p.run_id, count(s.stage_id)::DOUBLE AS value
        FROM prev AS p LEFT JOIN stages AS s ON s.run_id = p.prev_id
        GROUP BY p.run_id
    """,
    "workers": """
        SELECT t.run_id, c.num_workers::DOUBLE AS value
        FROM runs AS t LEFT JOIN cluster_configs AS c ON c.config_id = t.cluster_config_id
    """,
    "input_size": """
        SELECT run_id, value FROM run_attributes
        WHERE name = 'data_size_MB' AND availability = 'known_at_submit'
    """,
    "snapshot_before_submit": """
        SELECT t.run_id, (
            SELECT s.bytes FROM table_stats AS s
            WHERE s.table_name = 'sales.orders_raw' AND s.as_of < t.submit_time
            ORDER BY s.as_of DESC LIMIT 1
        )::DOUBLE AS value
        FROM runs AS t
    """,
    "hour_of_submit": "SELECT run_id, hour(submit_time)::DOUBLE AS value FROM runs",
}


@pytest.mark.parametrize("name", sorted(LEAKY))
def test_leaky_features_change_in_a_perturbed_world(name: str, ctx: GateContext) -> None:
    reasons = check_dynamic_leakage(spec(LEAKY[name]), ctx)
    assert reasons, f"{name} was not caught"
    assert {(r.gate, r.code) for r in reasons} == {("leakage", Leakage.PERTURBATION)}
    assert all("changed from" in r.message and "value for run '" in r.message for r in reasons)


@pytest.mark.parametrize("name", sorted(CLEAN))
def test_clean_features_do_not_change(name: str, ctx: GateContext) -> None:
    assert check_dynamic_leakage(spec(CLEAN[name]), ctx) == []


def test_tied_twin_is_named_with_both_values(ctx: GateContext) -> None:
    [reason, *_] = check_dynamic_leakage(spec(LEAKY["lag_over_tied_submits"]), ctx)
    assert "app:" in reason.message  # an event-log run
    assert "altered" in reason.message and " to " in reason.message


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT run_id, random() AS value FROM runs",  # the completeness gate's to reject
        "SELECT run_id, CAST(job_id AS INTEGER)::DOUBLE AS value FROM runs",  # fails
        "SELECT run_id, 1.0 AS value FROM nowhere",  # unknown table
        "SELECT run_id, (1.0 AS value FROM runs",  # does not parse
        "SELECT run_id, 1.0 AS value FROM w_runs",  # a world's view name is no table
    ],
    ids=["random", "failing", "unknown_table", "parse_error", "view_name"],
)
def test_features_that_do_not_run_get_no_leakage_reason(sql: str, ctx: GateContext) -> None:
    assert check_dynamic_leakage(spec(sql), ctx) == []


def test_targets_cover_every_situation_deterministically(ctx: GateContext) -> None:
    con = open_scratch(ctx.db)
    try:
        cutoffs = pick_cutoffs(con, ctx.settings)
        again = pick_cutoffs(con, ctx.settings)
        k = ctx.settings.dynamic_targets
        candidates = con.execute(CANDIDATES_SQL, {"seed": str(ctx.settings.seed), "k": k})
        flags = {row[0]: (row[4], *row[5:]) for row in candidates.fetchall()}
    finally:
        con.close()
    assert cutoffs == again
    assert len(cutoffs) == ctx.settings.dynamic_targets

    def situations(run_ids: Iterable[str]) -> set[str]:
        names = ("source", *SITUATIONS)
        return {
            flags[r][0] if name == "source" else name
            for r in run_ids
            if r in flags
            for name, on in zip(names, flags[r], strict=True)
            if on
        }

    chosen = {r for ids in cutoffs.values() for r in ids}
    assert situations(flags) >= set(SITUATIONS) | {"workspace", "event_log", "c3o"}
    assert situations(chosen) == situations(flags)
    assert any(len(ids) > 1 for ids in cutoffs.values()), "runs submitted together share a world"


def world_rows(ctx: GateContext, cutoff: datetime, sql: str) -> dict[str, list[tuple[Any, ...]]]:
    """``sql`` (reading ``{t}``) in the baseline and in both variants' worlds at ``cutoff``."""
    con = open_scratch(ctx.db)
    try:
        tables = {"runs", "run_attributes", "table_stats", "stages"}
        worlds = build_worlds(con, ctx.catalog, [cutoff], tables)
        views = {"baseline": BASELINE, **{w.variant.value: w for w in worlds}}
        return {name: con.execute(sql.format(t=v.prefix)).fetchall() for name, v in views.items()}
    finally:
        con.close()


def test_world_hides_what_was_learnt_at_or_after_the_cutoff(ctx: GateContext) -> None:
    cutoff = datetime(2024, 2, 12, 6, 0)  # run 7002's submission; 7001 ended the day before
    runs = world_rows(
        ctx,
        cutoff,
        "SELECT run_id, duration_s, status, end_time > TIMESTAMP '2024-02-12 06:00' "
        "FROM {t}runs WHERE job_id = '411' ORDER BY run_id",
    )
    assert [r[0] for r in runs["baseline"]] == ["7001", "7002", "7003"]
    assert runs["baseline"][0] == runs["alter"][0] == runs["delete"][0]  # ended before
    assert [r[0] for r in runs["alter"]] == ["7001", "7002"]  # 7003 was submitted later
    _, duration, status, still_running = runs["alter"][1]
    assert duration != runs["baseline"][1][1] and still_running
    assert status != runs["baseline"][1][2]  # FAILED flips to another status
    assert runs["delete"][1][1:] == (None, None, None)


def test_world_hides_later_snapshots_and_own_post_execution_attributes(
    ctx: GateContext,
) -> None:
    cutoff = datetime(2024, 2, 12, 6, 0)
    snapshots = world_rows(
        ctx,
        cutoff,
        "SELECT as_of, bytes FROM {t}table_stats "
        "WHERE table_name = 'sales.orders_raw' ORDER BY as_of",
    )
    assert len(snapshots["baseline"]) == 3  # at 05:00 on the 11th, 12th and 13th
    assert snapshots["alter"][:2] == snapshots["baseline"][:2]  # taken before submit
    assert snapshots["alter"][2] != snapshots["baseline"][2]
    assert snapshots["delete"] == snapshots["baseline"][:2]
    attributes = world_rows(
        ctx,
        cutoff,
        "SELECT run_id, value FROM {t}run_attributes "
        "WHERE name = 'setup_duration_s' AND run_id IN ('7001', '7002') ORDER BY run_id",
    )
    assert attributes["alter"][0] == attributes["baseline"][0]
    assert attributes["alter"][1] != attributes["baseline"][1]
    assert attributes["delete"] == attributes["baseline"][:1]


def test_world_deletes_the_telemetry_of_unended_runs(ctx: GateContext) -> None:
    [(run_id, submitted)] = rows(
        ctx.db,
        "SELECT r.run_id, r.submit_time FROM runs AS r WHERE r.run_id IN "
        "(SELECT run_id FROM stages) ORDER BY r.submit_time, r.run_id LIMIT 1",
    )
    stages = world_rows(
        ctx,
        submitted,
        f"SELECT count(*), sum(duration_ms) FROM {{t}}stages WHERE run_id = '{run_id}'",
    )
    assert stages["baseline"][0][0] > 0
    assert stages["alter"][0][0] == stages["baseline"][0][0]  # rows kept, values changed
    assert stages["alter"][0][1] != stages["baseline"][0][1]
    assert stages["delete"] == [(0, None)]


def test_worlds_cannot_reach_the_warehouse(ctx: GateContext) -> None:
    tree = sqlglot.parse_one("SELECT run_id, duration_s AS value FROM runs", read="duckdb")
    assert isinstance(tree, exp.Query)
    con = open_scratch(ctx.db)
    worlds = build_worlds(con, ctx.catalog, [datetime(2024, 1, 1)], {"runs"})
    names = [
        row[0] for row in con.execute("SELECT database_name FROM duckdb_databases()").fetchall()
    ]
    assert SOURCE in names and not any("file" in n for n in names)
    catalog = world_catalog(ctx.catalog, [BASELINE, *worlds], {"runs"})
    with Sandbox.wrap(con, catalog) as box:
        assert box.query(in_world(tree, worlds[0], {"runs"}).sql("duckdb")).rows
        with pytest.raises(SandboxViolation, match="main schema"):
            box.query(f"SELECT run_id FROM {SOURCE}.runs")
        with pytest.raises(SandboxViolation, match="not in the warehouse catalog"):
            box.query("SELECT run_id FROM runs")  # only the worlds' views are there


def test_in_world_leaves_ctes_alone() -> None:
    tree = sqlglot.parse_one(
        "WITH runs AS (SELECT * FROM runs) SELECT * FROM runs JOIN stages USING (run_id)",
        read="duckdb",
    )
    assert isinstance(tree, exp.Query)
    world = World("w0a_", datetime(2024, 1, 1), Variant.ALTER)
    out = in_world(tree, world, {"runs", "stages"}).sql("duckdb")
    assert out == (
        "WITH runs AS (SELECT * FROM w0a_runs AS runs) "
        "SELECT * FROM runs JOIN w0a_stages AS stages USING (run_id)"
    )


def test_a_snapshot_taken_at_the_cutoff_is_known_there(ctx: GateContext) -> None:
    cutoff = datetime(2024, 2, 12, 5, 0)  # the instant the second snapshot was taken
    snapshots = world_rows(
        ctx,
        cutoff,
        "SELECT as_of, bytes FROM {t}table_stats "
        "WHERE table_name = 'sales.orders_raw' ORDER BY as_of",
    )
    assert [row[0] for row in snapshots["baseline"][:2]] == [datetime(2024, 2, 11, 5), cutoff]
    assert snapshots["alter"][:2] == snapshots["baseline"][:2]  # as_of <= cutoff: kept
    assert snapshots["alter"][2] != snapshots["baseline"][2]  # as_of > cutoff: altered
    assert snapshots["delete"] == snapshots["baseline"][:2]


AT_SUBMIT = """table,as_of,bytes,rows,files,partitions
sales.orders_raw,2024-02-11T06:00:00Z,1000,10,1,1
sales.orders_raw,2024-02-12T06:00:00Z,2000,20,2,2
sales.orders_raw,2024-02-13T06:00:00Z,3000,30,3,3
"""
"""Snapshots dated at the very instants runs 7001-7003 of the mini workspace were submitted."""

LATEST_SNAPSHOT = """
    SELECT t.run_id, (
        SELECT s.bytes FROM table_stats AS s
        WHERE s.table_name = 'sales.orders_raw' AND {bound}
        ORDER BY s.as_of DESC LIMIT 1
    )::DOUBLE AS value
    FROM runs AS t
"""


@pytest.fixture(scope="module")
def snapshot_at_submit_ctx(tmp_path_factory: pytest.TempPathFactory) -> GateContext:
    """The mini workspace plus a snapshot taken at each of three submission instants."""
    home = tmp_path_factory.mktemp("snapshot-at-submit")
    workspace = home / "mini"
    shutil.copytree(REPO / "examples" / "workspaces" / "mini", workspace)
    (workspace / "table_stats" / "at_submit.csv").write_text(AT_SUBMIT)
    ingest([workspace], IngestSettings(db=home / "w.duckdb", workers=1))
    return GateContext.load(home / "w.duckdb", GateSettings(dynamic_targets=20))


def test_the_fixture_has_snapshots_at_submission_instants(
    snapshot_at_submit_ctx: GateContext,
) -> None:
    tied = rows(
        snapshot_at_submit_ctx.db,
        "SELECT r.run_id FROM runs AS r JOIN table_stats AS s ON s.as_of = r.submit_time "
        "ORDER BY r.run_id",
    )
    assert tied == [("7001",), ("7002",), ("7003",)]


@pytest.mark.parametrize(
    "bound", ["s.as_of <= t.submit_time", "s.as_of < t.submit_time"], ids=["inclusive", "strict"]
)
def test_a_snapshot_bound_to_submission_does_not_change(
    bound: str, snapshot_at_submit_ctx: GateContext
) -> None:
    feature = spec(LATEST_SNAPSHOT.format(bound=bound))
    assert check_dynamic_leakage(feature, snapshot_at_submit_ctx) == []
    assert check_leakage(feature, snapshot_at_submit_ctx) == []


def test_a_snapshot_after_submission_changes(snapshot_at_submit_ctx: GateContext) -> None:
    late = spec(LATEST_SNAPSHOT.format(bound="s.as_of <= t.submit_time + INTERVAL 1 DAY"))
    reasons = check_dynamic_leakage(late, snapshot_at_submit_ctx)
    assert reasons and {r.code for r in reasons} == {Leakage.PERTURBATION}
    assert any("later snapshots" in r.message for r in reasons)


def _worlds_checked(
    monkeypatch: pytest.MonkeyPatch, sql: str, ctx: GateContext, delay_s: float = 0.0
) -> tuple[list[tuple[str, bool]], list[str]]:
    """The worlds the check recomputed ``sql`` in (prefix, altered), and its reasons."""
    import autofe.gates.leakage_dynamic as dynamic

    seen: list[tuple[str, bool]] = []
    check_world = dynamic._check_world
    query, query_renamed = Sandbox.query, Sandbox.query_renamed

    def spy(box: Sandbox, baseline: dynamic.Baseline, world: World, *rest: Any, **kw: Any) -> Any:
        seen.append((world.prefix, world.variant is Variant.ALTER))
        return check_world(box, baseline, world, *rest, **kw)

    def slow_query(box: Sandbox, sql: str, limit: int | None = None) -> Any:
        time.sleep(delay_s)
        return query(box, sql, limit)

    def slow_renamed(box: Sandbox, sql: str, *rest: Any) -> Any:
        time.sleep(delay_s)
        return query_renamed(box, sql, *rest)

    with monkeypatch.context() as m:
        m.setattr(dynamic, "_check_world", spy)
        m.setattr(Sandbox, "query", slow_query)
        m.setattr(Sandbox, "query_renamed", slow_renamed)
        reasons = check_dynamic_leakage(spec(sql), ctx)
    return sorted(seen), [r.message for r in reasons]  # two at a time: in no set order


def test_a_cheap_feature_is_checked_in_every_world(
    monkeypatch: pytest.MonkeyPatch, ctx: GateContext
) -> None:
    seen, _ = _worlds_checked(monkeypatch, CLEAN["hour_of_submit"], ctx)
    con = open_scratch(ctx.db)
    try:
        cutoffs = pick_cutoffs(con, ctx.settings)
    finally:
        con.close()
    assert len(seen) == 2 * len(cutoffs) == len(set(seen))  # altered and deleted, each once


def test_the_worlds_checked_are_the_same_on_a_slow_machine(
    monkeypatch: pytest.MonkeyPatch, ctx: GateContext
) -> None:
    """A clock budget checked fewer worlds when each query was slow; the work budget does not."""
    import autofe.gates.leakage_dynamic as dynamic

    sql = CLEAN["hour_of_submit"]
    fast = _worlds_checked(monkeypatch, sql, ctx)
    slow = _worlds_checked(monkeypatch, sql, ctx, delay_s=dynamic.WORLD_BUDGET_S / 4)
    assert slow == fast and len(fast[0]) > 4
    leaky = LEAKY["lag_over_tied_submits"]
    assert _worlds_checked(monkeypatch, leaky, ctx, delay_s=0.2) == _worlds_checked(
        monkeypatch, leaky, ctx
    )


def test_a_feature_over_the_work_budget_is_checked_in_the_fewest_worlds(
    monkeypatch: pytest.MonkeyPatch, ctx: GateContext
) -> None:
    import autofe.gates.leakage_dynamic as dynamic

    monkeypatch.setattr(dynamic, "WORLD_BUDGET_ROWS", 1)
    seen, reasons = _worlds_checked(monkeypatch, LEAKY["lag_over_tied_submits"], ctx)
    assert len(seen) == dynamic.MIN_WORLDS
    assert all(altered for _, altered in seen)  # the most telling test first
    assert reasons  # and it still catches the tied twin


def test_worlds_run_the_baselines_guarded_text_renamed(
    monkeypatch: pytest.MonkeyPatch, ctx: GateContext
) -> None:
    """Each world's SQL is the baseline's with the views renamed: parsed by the guards once."""
    import autofe.sandbox.session as session
    from autofe.sandbox.guard import guard_sql as guard

    guarded: list[str] = []

    def counted(sql: str, catalog: Any) -> Any:
        guarded.append(sql)
        return guard(sql, catalog)

    monkeypatch.setattr(session, "guard_sql", counted)
    seen, reasons = _worlds_checked(monkeypatch, LEAKY["lag_over_tied_submits"], ctx)
    assert reasons and len(seen) > 4
    assert len(set(guarded)) == 1  # the baseline's text (its values, its profile, its rerun)
    assert all(re.search(r"\bw_runs\b", sql) for sql in guarded)


def _one_worker(ctx: GateContext) -> GateContext:
    limits = dataclasses.replace(ctx.settings.limits, threads=1)
    return dataclasses.replace(ctx, settings=dataclasses.replace(ctx.settings, limits=limits))


@pytest.mark.parametrize("name", ["lag_over_tied_submits", "latest_snapshot_unbounded"])
def test_worlds_computed_two_at_a_time_give_one_workers_reasons(
    name: str, ctx: GateContext
) -> None:
    assert ctx.settings.limits.threads == 2
    two = check_dynamic_leakage(spec(LEAKY[name]), ctx)
    assert two and two == check_dynamic_leakage(spec(LEAKY[name]), _one_worker(ctx))


def test_a_world_crowded_out_of_memory_is_computed_again_alone(
    monkeypatch: pytest.MonkeyPatch, ctx: GateContext
) -> None:
    """A memory limit hit beside another world's query is no verdict: that world runs alone."""
    import autofe.gates.leakage_dynamic as dynamic

    alone = check_dynamic_leakage(spec(LEAKY["lag_over_tied_submits"]), _one_worker(ctx))
    values_renamed = dynamic._values_renamed
    calls: list[str] = []

    def crowded(box: Sandbox, baseline: Any, world: World) -> Any:
        calls.append(world.prefix)
        if calls.count(world.prefix) == 1:
            raise LimitExceeded("the 1GB memory limit")
        return values_renamed(box, baseline, world)

    monkeypatch.setattr(dynamic, "_values_renamed", crowded)
    assert check_dynamic_leakage(spec(LEAKY["lag_over_tied_submits"]), ctx) == alone
    assert calls.count(calls[0]) == 2  # crowded out, then alone
