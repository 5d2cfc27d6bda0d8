"""The completeness gate on the real gates warehouse: one real query per reason code.

The warehouse holds ~4 700 runs (the example workspace, 43 real event logs, C3O); 99 % are
C3O runs, which is what the coverage numbers below depend on.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from autofe.featurespec import FeatureSpec, ValueType
from autofe.gates.codes import Completeness
from autofe.gates.completeness import check_completeness
from autofe.gates.context import GateContext, GateSettings, Reason
from autofe.sandbox.limits import SandboxLimits


@pytest.fixture(scope="module")
def ctx(gates_warehouse: Path) -> GateContext:
    return GateContext.load(gates_warehouse)


def spec(sql: str, value_type: ValueType = "DOUBLE") -> FeatureSpec:
    return FeatureSpec(name="f", sql=sql, category="history", value_type=value_type)


def codes(reasons: list[Reason]) -> list[str]:
    return [r.code for r in reasons]


def with_settings(ctx: GateContext, settings: GateSettings) -> GateContext:
    return dataclasses.replace(ctx, settings=settings)


LAST_ENDED_DURATION = """
SELECT t.run_id, (
    SELECT h.duration_s FROM runs AS h
    WHERE h.job_id = t.job_id AND h.end_time < t.submit_time
    ORDER BY h.end_time DESC, h.run_id DESC LIMIT 1
) AS value
FROM runs AS t
"""

INPUT_SIZE = """
SELECT r.run_id, a.value
FROM runs AS r
LEFT JOIN run_attributes AS a
  ON a.run_id = r.run_id AND a.name = 'data_size_MB' AND a.availability = 'known_at_submit'
"""

EARLIER_RUNS = """
SELECT t.run_id, count(h.run_id) AS value
FROM runs AS t
LEFT JOIN runs AS h ON h.job_id = t.job_id AND h.submit_time < t.submit_time
GROUP BY t.run_id
"""


@pytest.mark.parametrize(
    ("sql", "value_type"),
    [
        (LAST_ENDED_DURATION, "DOUBLE"),
        (INPUT_SIZE, "DOUBLE"),
        (EARLIER_RUNS, "BIGINT"),
        (EARLIER_RUNS, "DOUBLE"),  # an integer is a number
        ("SELECT run_id, hour(submit_time) AS value FROM runs", "INTEGER"),
        ("SELECT run_id, dayofweek(submit_time) IN (0, 6) AS value FROM runs", "BOOLEAN"),
        ("SELECT run_id, job_id AS value FROM runs", "VARCHAR"),
    ],
    ids=[
        "last_duration",
        "input_size",
        "earlier_runs",
        "count_as_double",
        "hour",
        "weekend",
        "job",
    ],
)
def test_useful_features_pass(sql: str, value_type: ValueType, ctx: GateContext) -> None:
    assert check_completeness(spec(sql, value_type), ctx) == []


def test_parse_error_points_at_the_mistake(ctx: GateContext) -> None:
    sql = "SELECT run_id, (duration_s AS value FROM runs"
    [reason] = check_completeness(spec(sql), ctx)
    assert (reason.gate, reason.code) == ("completeness", Completeness.PARSE_ERROR)
    assert reason.span is not None and "does not parse" in reason.message


def test_export_database_is_refused_by_its_kind(ctx: GateContext) -> None:
    sql = "EXPORT DATABASE '/tmp/dump'"  # sqlglot cannot parse it: its keywords say what it is
    [reason] = check_completeness(spec(sql), ctx)
    assert (reason.code, reason.message) == (
        Completeness.SANDBOX,
        "sandbox refused the query: EXPORT DATABASE statements are not allowed: "
        "only one read query (SELECT / WITH) may run",
    )
    assert reason.span == (0, len(sql))


@pytest.mark.parametrize(
    ("sql", "kind"),
    [
        ("CREATE TABLE pwned AS SELECT * FROM runs", "CREATE TABLE"),  # not "no table 'pwned'"
        ("IMPORT DATABASE '/tmp/dump'", "IMPORT DATABASE"),
        ("COPY runs TO '/tmp/runs.csv'", "COPY"),
    ],
)
def test_a_statement_that_is_no_query_is_named(sql: str, kind: str, ctx: GateContext) -> None:
    [reason] = check_completeness(spec(sql), ctx)
    assert reason.code == Completeness.SANDBOX
    assert f"{kind} statements are not allowed: only one read query" in reason.message


def test_a_full_width_semicolon_is_named_with_its_code_point_and_offset(
    ctx: GateContext,
) -> None:
    sql = "SELECT run_id, hour(submit_time)::DOUBLE AS value FROM runs；"
    [reason] = check_completeness(spec(sql), ctx)
    offset = sql.index("；")
    assert (reason.code, reason.message) == (
        Completeness.PARSE_ERROR,
        f"SQL does not parse: character '；' (U+FF1B FULLWIDTH SEMICOLON) at offset {offset}: "
        "not SQL; use ';'",
    )
    assert reason.span == (offset, offset + 1)


def test_an_unterminated_string_is_a_parse_error(ctx: GateContext) -> None:
    [reason] = check_completeness(spec("SELECT run_id, 'abc AS value FROM runs"), ctx)
    assert reason.code == Completeness.PARSE_ERROR and "cannot tokenize" in reason.message


@pytest.mark.parametrize(
    ("sql", "said"),
    [
        ("SELECT run_id, 1.0 AS value FROM runs; DROP TABLE runs", "only one statement"),
        ("SELECT * FROM read_csv('/etc/passwd')", "table function 'read_csv'"),
        ("SELECT run_id, length(getenv('HOME'))::DOUBLE AS value FROM runs", "'getenv'"),
        ("SELECT r.run_id, 1.0 AS value FROM system.main.runs AS r", "main schema"),
    ],
    ids=["two_statements", "file_read", "environment", "other_catalog"],
)
def test_sandbox_refusal_says_why(sql: str, said: str, ctx: GateContext) -> None:
    [reason] = check_completeness(spec(sql), ctx)
    assert reason.code == Completeness.SANDBOX
    assert said in reason.message


def test_unknown_table_is_named_with_the_tables_there_are(ctx: GateContext) -> None:
    sql = "SELECT r.run_id, 1.0 AS value FROM run AS r"
    [reason] = check_completeness(spec(sql), ctx)
    assert reason.code == Completeness.UNKNOWN_TABLE
    assert "'run'" in reason.message and "runs" in reason.message
    assert reason.span is not None and sql[reason.span[0] : reason.span[1]].startswith("run")


def test_cte_names_are_not_unknown_tables(ctx: GateContext) -> None:
    sql = "WITH hist AS (SELECT run_id, 1.0 AS value FROM runs) SELECT * FROM hist"
    assert check_completeness(spec(sql), ctx) == []


def test_unknown_column_is_named_with_a_suggestion(ctx: GateContext) -> None:
    sql = "SELECT r.run_id, r.duration_sec AS value FROM runs AS r"
    [reason] = check_completeness(spec(sql), ctx)
    assert reason.code == Completeness.UNKNOWN_COLUMN
    assert reason.column == "duration_sec" and "duration_s" in reason.message
    assert reason.span is not None and "duration_sec" in sql[reason.span[0] : reason.span[1]]


def test_column_from_the_wrong_table_is_unknown(ctx: GateContext) -> None:
    sql = "SELECT run_id, task_count::DOUBLE AS value FROM runs"
    [reason] = check_completeness(spec(sql), ctx)
    assert (reason.code, reason.column) == (Completeness.UNKNOWN_COLUMN, "task_count")


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT run_id, job_id, 1.0 AS value FROM runs",
        "SELECT job_id, 1.0 AS value FROM runs",
        "SELECT run_id FROM runs",
    ],
    ids=["three_columns", "not_run_id", "no_value"],
)
def test_shape_must_be_run_id_and_one_value(sql: str, ctx: GateContext) -> None:
    assert codes(check_completeness(spec(sql), ctx)) == [Completeness.SHAPE]


def test_one_row_per_attribute_repeats_run_ids(ctx: GateContext) -> None:
    sql = "SELECT r.run_id, a.value FROM runs AS r JOIN run_attributes AS a USING (run_id)"
    reasons = check_completeness(spec(sql), ctx)
    assert Completeness.DUPLICATE_RUN_ID in codes(reasons)
    assert "more than once" in reasons[0].message


@pytest.mark.parametrize(
    ("sql", "value_type"),
    [
        ("SELECT run_id, job_id AS value FROM runs", "DOUBLE"),
        ("SELECT run_id, epoch(submit_time)::DOUBLE AS value FROM runs", "BIGINT"),
        ("SELECT run_id, hour(submit_time) AS value FROM runs", "BOOLEAN"),
        ("SELECT run_id, hour(submit_time) AS value FROM runs", "VARCHAR"),
    ],
    ids=["text_as_double", "double_as_bigint", "int_as_boolean", "int_as_varchar"],
)
def test_value_type_must_match_the_declared_one(
    sql: str, value_type: ValueType, ctx: GateContext
) -> None:
    [reason] = check_completeness(spec(sql, value_type), ctx)
    assert reason.code == Completeness.VALUE_TYPE
    assert value_type in reason.message


def test_over_the_extraction_budget(ctx: GateContext) -> None:
    tight = with_settings(ctx, GateSettings(budget_s_per_1000_runs=1e-9))
    [reason] = check_completeness(spec(LAST_ENDED_DURATION), tight)
    assert reason.code == Completeness.OVER_BUDGET
    assert "per 1 000 runs" in reason.message


def test_the_sandbox_timeout_is_over_budget(ctx: GateContext) -> None:
    quick = with_settings(ctx, GateSettings(limits=SandboxLimits(timeout_s=0.2)))
    sql = """
    SELECT a.run_id, count(*)::DOUBLE AS value
    FROM runs AS a, runs AS b, runs AS c
    WHERE a.submit_time < b.submit_time AND b.submit_time < c.submit_time
    GROUP BY a.run_id
    """
    [reason] = check_completeness(spec(sql), quick)
    assert reason.code == Completeness.OVER_BUDGET
    assert "timeout" in reason.message


def test_features_of_a_few_runs_of_each_job_have_low_coverage(ctx: GateContext) -> None:
    sql = "SELECT run_id, 1.0 AS value FROM runs WHERE run_id LIKE '%1'"
    [reason] = check_completeness(spec(sql), ctx)
    assert reason.code == Completeness.LOW_COVERAGE
    assert "get a non-null value" in reason.message and "runs of the" in reason.message
    lenient = with_settings(ctx, GateSettings(min_coverage=0.05))
    assert check_completeness(spec(sql), lenient) == []


def test_a_job_s_own_parameter_is_measured_on_that_job_s_runs(ctx: GateContext) -> None:
    """k exists only for the k-means runs, for each of them: not missing elsewhere."""
    sql = "SELECT run_id, value FROM run_attributes WHERE name = 'k'"
    assert check_completeness(spec(sql), ctx) == []
    smallest = f"{sql} AND value = (SELECT min(value) FROM run_attributes WHERE name = 'k')"
    [reason] = check_completeness(spec(smallest), ctx)  # one k of four: a quarter of its runs
    assert reason.code == Completeness.LOW_COVERAGE and "of the 1 jobs" in reason.message


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT run_id, random() AS value FROM runs",
        # now() is fixed per query; its microseconds differ between two runs
        "SELECT run_id, (epoch_us(now()) % 1000000)::DOUBLE AS value FROM runs",
        "SELECT run_id, CASE WHEN random() < 0.5 THEN 1.0 END AS value FROM runs",
    ],
    ids=["random", "now", "random_nulls"],
)
def test_values_must_repeat(sql: str, ctx: GateContext) -> None:
    reasons = check_completeness(spec(sql), with_settings(ctx, GateSettings(min_coverage=0.0)))
    assert codes(reasons) == [Completeness.NONDETERMINISTIC]
    assert "then" in reasons[0].message and "random()" in reasons[0].message


def test_query_error_carries_duckdbs_message(ctx: GateContext) -> None:
    sql = "SELECT run_id, CAST(job_id AS INTEGER)::DOUBLE AS value FROM runs"
    [reason] = check_completeness(spec(sql), ctx)
    assert reason.code == Completeness.FAILED
    assert "Conversion Error" in reason.message


def test_structural_failure_returns_early(ctx: GateContext) -> None:
    """An unknown table would also make every column unresolvable: one reason, not many."""
    sql = "SELECT x.run_id, x.nope AS value FROM nowhere AS x"
    assert codes(check_completeness(spec(sql), ctx)) == [Completeness.UNKNOWN_TABLE]


def test_several_data_failures_are_all_reported(ctx: GateContext) -> None:
    sql = (
        "SELECT r.run_id, a.value_text AS value "
        "FROM runs AS r JOIN run_attributes AS a USING (run_id) WHERE r.run_id LIKE '%1'"
    )
    assert set(codes(check_completeness(spec(sql), ctx))) == {
        Completeness.DUPLICATE_RUN_ID,
        Completeness.VALUE_TYPE,
        Completeness.LOW_COVERAGE,
    }


def test_default_settings_are_the_documented_ones() -> None:
    settings = GateSettings()
    assert (settings.min_coverage, settings.budget_s_per_1000_runs) == (0.5, 2.0)
