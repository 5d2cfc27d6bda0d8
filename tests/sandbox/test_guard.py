"""The guards' accept path (real feature shapes pass and run) and their rules in detail."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from sandbox_warehouse import FAST, build_warehouse
from sqlglot import exp

from autofe.errors import SandboxViolation
from autofe.sandbox.duckdb_parse import MAX_GENERATED, guard_duckdb_parse
from autofe.sandbox.guard import ALLOWED_FUNCTIONS, TABLE_FUNCTIONS, guard_sql
from autofe.sandbox.limits import SandboxLimits
from autofe.sandbox.session import QueryError, Sandbox
from autofe.warehouse.catalog import code_catalog

CATALOG = code_catalog()

FEATURES = {
    "cte_and_lag": """
        WITH ordered AS (
            SELECT run_id, job_id, submit_time,
                   lag(duration_s) OVER (PARTITION BY job_id ORDER BY submit_time) AS prev
            FROM runs
        )
        SELECT run_id, prev AS value FROM ordered
    """,
    "joins_case_date_diff": """
        SELECT r.run_id,
               CASE WHEN c.num_workers IS NULL THEN c.autoscale_max ELSE c.num_workers END
                   * c.vcpu_per_node AS cores,
               date_diff('hour', j.created_time, r.submit_time) AS job_age_h
        FROM runs AS r
        JOIN cluster_configs AS c ON c.config_id = r.cluster_config_id
        LEFT JOIN jobs AS j USING (job_id)
    """,
    "correlated_subquery": """
        SELECT t.run_id,
               (SELECT avg(h.duration_s) FROM runs AS h
                WHERE h.job_id = t.job_id AND h.end_time < t.submit_time) AS value
        FROM runs AS t
    """,
    "exists_and_in": """
        SELECT t.run_id FROM runs AS t
        WHERE EXISTS (SELECT 1 FROM runs AS h WHERE h.job_id = t.job_id
                      AND h.end_time < t.submit_time AND h.status <> 'SUCCEEDED')
          AND t.cluster_config_id IN (SELECT config_id FROM cluster_configs WHERE num_workers > 2)
    """,
    "regexp_on_scripts": r"""
        SELECT job_id,
               regexp_matches(script_text, '(?i)\bjoin\b')::DOUBLE AS has_join,
               regexp_extract(script_text, 'FROM (\w+\.\w+)', 1) AS first_table
        FROM jobs
    """,
    "list_functions": """
        SELECT app_key, len(stage_ids) AS n, list_max(stage_ids) AS top,
               list_transform(stage_ids, lambda x: x * 2)[1] AS doubled,
               list_filter(stage_ids, lambda x: x > 0) AS positive,
               [s * 2 FOR s IN stage_ids] AS comprehension
        FROM spark_jobs
    """,
    "json_on_json_columns": """
        SELECT c.config_id,
               TRY_CAST(json_extract_string(c.spark_conf, '$."spark.sql.shuffle.partitions"')
                   AS INT) AS p,
               c.spark_conf ->> '$."spark.sql.shuffle.partitions"' AS raw,
               json_extract(r.parameters, '$.size_mb')::DOUBLE AS size_mb
        FROM cluster_configs AS c JOIN runs AS r ON r.cluster_config_id = c.config_id
    """,
    "union_and_qualify": """
        SELECT run_id, duration_s FROM runs WHERE status = 'FAILED'
        UNION ALL
        SELECT run_id, duration_s FROM runs
        QUALIFY row_number() OVER (PARTITION BY job_id ORDER BY submit_time DESC) = 1
    """,
    "from_first_group_by_all": """
        FROM runs SELECT job_id, count(*) AS n, median(duration_s) AS p50 GROUP BY ALL
        ORDER BY ALL
    """,
    "date_spine_in_from": """
        SELECT d.day, count(r.run_id) AS n
        FROM generate_series(TIMESTAMP '2024-01-01', TIMESTAMP '2024-01-10', INTERVAL 1 DAY)
             AS d(day)
        LEFT JOIN runs AS r ON date_trunc('day', r.submit_time) = d.day
        GROUP BY d.day
    """,
    "bounded_recursive_cte": """
        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5)
        SELECT sum(i) FROM n
    """,
    "window_frame": """
        SELECT run_id,
               avg(duration_s) OVER (PARTITION BY job_id ORDER BY submit_time
                                     ROWS BETWEEN 5 PRECEDING AND 1 PRECEDING) AS value
        FROM runs
    """,
    "strings_and_casts": """
        SELECT lower(name), lpad(CAST(length(name) AS VARCHAR), 4, '0'),
               split_part(name, ' ', 1), strftime(created_time, '%Y-%m'),
               coalesce(script_path, 'none'), EXTRACT(year FROM created_time),
               repeat('-', 3), range(3) AS small_list
        FROM main.jobs
    """,
}


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    db = build_warehouse(tmp_path_factory.mktemp("guard") / "w.duckdb")
    with Sandbox.open(db, FAST) as sandbox:
        yield sandbox


@pytest.mark.parametrize("name", FEATURES)
def test_feature_queries_pass_both_guards_and_run(name: str, box: Sandbox) -> None:
    tree = guard_sql(FEATURES[name], CATALOG)
    assert isinstance(tree, exp.Query)
    result = box.query(FEATURES[name])
    assert result.rows, name


def test_feature_queries_run_on_real_data(gates_warehouse: Path, tmp_path: Path) -> None:
    db = Path(shutil.copy(gates_warehouse, tmp_path / "gates.duckdb"))
    with Sandbox.open(db, SandboxLimits()) as real:
        counts = {name: len(real.query(sql).rows) for name, sql in FEATURES.items()}
    assert counts["cte_and_lag"] == counts["correlated_subquery"] > 100
    assert counts["json_on_json_columns"] > 0


def test_an_unknown_column_is_left_to_duckdb(box: Sandbox) -> None:
    sql = "SELECT no_such_column FROM runs"
    assert isinstance(guard_sql(sql, CATALOG), exp.Select)
    with pytest.raises(QueryError, match="no_such_column") as caught:
        box.query(sql)
    assert "\n" not in str(caught.value)


def test_an_unknown_table_is_refused_with_its_span() -> None:
    sql = "SELECT r.run_id FROM runs AS r JOIN secrets AS s USING (run_id)"
    with pytest.raises(SandboxViolation, match="not in the warehouse catalog") as caught:
        guard_sql(sql, CATALOG)
    span = caught.value.span
    assert span is not None and sql[span[0] : span[1]] == "secrets AS s"


@pytest.mark.parametrize(
    ("sql", "offending"),
    [
        ("SELECT read_text('/etc/passwd')", "read_text('/etc/passwd')"),
        ("SELECT 1; DROP TABLE runs", "DROP TABLE runs"),
        ("SELECT * FROM runs, read_csv(lower('x'))", "read_csv(lower('x'))"),
        ("COPY runs TO 'x.csv'", "COPY runs TO 'x.csv'"),
        ("SELECT * FROM information_schema.tables", "information_schema.tables"),
        ("SELECT (1", "1"),
    ],
)
def test_spans_point_at_the_offending_text(sql: str, offending: str) -> None:
    with pytest.raises(SandboxViolation) as caught:
        guard_sql(sql, CATALOG)
    span = caught.value.span
    assert span is not None and sql[span[0] : span[1]] == offending


@pytest.mark.parametrize(
    "sql",
    [
        "WITH runs AS (SELECT 1 AS run_id) SELECT * FROM runs",
        "WITH a AS (SELECT 1 AS x), b AS (SELECT * FROM a) SELECT * FROM b",
        "WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t WHERE n < 3) FROM t",
        "SELECT * FROM (WITH a AS (SELECT 1 AS x) SELECT * FROM a) AS q",
    ],
)
def test_ctes_are_tables_where_they_are_in_scope(sql: str) -> None:
    guard_sql(sql, CATALOG)


@pytest.mark.parametrize(
    "sql",
    [
        "WITH a AS (SELECT * FROM b), b AS (SELECT 1 AS x) SELECT * FROM a",
        "WITH a AS (SELECT * FROM a) SELECT * FROM a",
        "SELECT * FROM (WITH a AS (SELECT 1 AS x) SELECT * FROM a) AS q, a",
    ],
)
def test_ctes_are_not_tables_outside_their_scope(sql: str) -> None:
    with pytest.raises(SandboxViolation, match=r"'a'|'b'"):
        guard_sql(sql, CATALOG)


def test_operators_and_syntax_forms_are_not_mistaken_for_functions() -> None:
    sql = """
        SELECT CAST(a AS INT), TRY_CAST(a AS INT), a::JSON ->> '$.k', a ~ 'x', a ** 2,
               [1, 2][1], {'k': 1}.k, a LIKE 'x%' AND a IS NOT NULL OR NOT a, -a,
               CASE WHEN a THEN 1 END, POSITION('x' IN a), SUBSTRING(a FROM 1 FOR 2),
               TRIM(BOTH 'x' FROM a), current_date, a IN (1, 2), a BETWEEN 1 AND 2
        FROM runs AS r JOIN jobs AS j ON contains(r.script_text, j.name) AND r.job_id = j.job_id
    """
    guard_sql(sql, CATALOG)


def test_duckdb_parse_check_sees_what_duckdb_runs() -> None:
    con = duckdb.connect()
    refused = {
        "SELECT 1; SELECT 2": "DuckDB parses this as SELECT, SELECT",
        "COPY runs TO 'x.csv'": "not one SELECT",
        "SELECT * FROM read_csv('x')": "table function 'read_csv'",
        "SELECT current_setting('threads')": "function 'current_setting'",
        "SELECT * FROM information_schema.tables": "main schema",
        "SELECT * FROM ingested_files": "not in the warehouse catalog",
        "SELECT system.main.abs(1)": "qualified call",
        f"SELECT repeat('ab', {MAX_GENERATED})": r"repeat\(\.\.\.\) could build 200000",
        "SELECT range(run_id) FROM runs": "size is not a literal",
    }
    for sql, reason in refused.items():
        with pytest.raises(SandboxViolation, match=reason):
            guard_duckdb_parse(con, sql, CATALOG)
    guard_duckdb_parse(con, "SELECT count(*) FROM range(1000000000000)", CATALOG)


SYNTAX_FORMS = {
    "cast", "trycast", "case", "anyvalue", "groupconcat", "percentilecont", "percentiledisc",
    "approxquantile", "jsonobject", "strposition", "array", "struct", "exists", "currentdate",
    "currenttimestamp", "percentile_cont", "percentile_disc", "coalesce", "ifnull", "extract",
    "current_timestamp", "columns",
}  # fmt: skip
"""Allowed names DuckDB parses as syntax rather than as catalog functions (or sqlglot keys)."""


def test_the_allow_list_names_real_duckdb_functions_and_no_table_reader() -> None:
    con = duckdb.connect()
    rows = con.execute("SELECT function_name, function_type FROM duckdb_functions()").fetchall()
    known = {str(name).lower() for name, _ in rows}
    table_functions = {str(name).lower() for name, kind in rows if kind == "table"}
    assert known >= ALLOWED_FUNCTIONS - SYNTAX_FORMS, ALLOWED_FUNCTIONS - SYNTAX_FORMS - known
    # repeat is allowed as a scalar only: in FROM the table-function list applies
    assert ALLOWED_FUNCTIONS & table_functions == TABLE_FUNCTIONS | {"repeat"}
    assert not ALLOWED_FUNCTIONS & {
        "current_setting", "getenv", "getvariable", "read_text", "read_blob", "query",
        "query_table", "glob", "nextval", "setseed", "write_log", "json_serialize_sql",
        "sleep_ms", "pg_sleep", "version", "current_query",
    }  # fmt: skip
