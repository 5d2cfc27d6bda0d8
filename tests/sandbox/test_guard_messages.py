"""What a refusal says: the statement kind, or the look-alike character, by name and place."""

from __future__ import annotations

import pytest

from autofe.errors import SandboxViolation
from autofe.sandbox.guard import guard_sql
from autofe.sandbox.statements import check_statements
from autofe.warehouse.catalog import code_catalog

CATALOG = code_catalog()
ONLY_QUERIES = "statements are not allowed: only one read query (SELECT / WITH) may run"


def refusal(sql: str) -> SandboxViolation:
    with pytest.raises(SandboxViolation) as caught:
        guard_sql(sql, CATALOG)
    return caught.value


@pytest.mark.parametrize(
    ("sql", "kind"),
    [
        ("EXPORT DATABASE '/tmp/dump'", "EXPORT DATABASE"),
        ("EXPORT DATABASE '/tmp/dump' (FORMAT parquet)", "EXPORT DATABASE"),
        ("import database '/tmp/dump'", "IMPORT DATABASE"),
        ("COPY runs TO 'x.csv'", "COPY"),
        ("ATTACH 'x.duckdb' AS x", "ATTACH"),
        ("CREATE OR REPLACE TEMP MACRO f(a) AS a", "CREATE MACRO"),
        ("FORCE INSTALL shellfs FROM community", "FORCE INSTALL"),
        ("PRAGMA memory_limit = '9GB'", "PRAGMA"),
        ("SET threads = 64", "SET"),
        ("CALL enable_profiling()", "CALL"),
        ("UNINSTALL httpfs", "UNINSTALL"),  # sqlglot reads it as a column with an alias
    ],
)
def test_a_statement_that_is_no_query_is_refused_by_its_kind(sql: str, kind: str) -> None:
    violation = refusal(sql)
    assert violation.reason == f"{kind} {ONLY_QUERIES}"
    assert violation.span == (0, len(sql))


def test_export_database_is_named_although_sqlglot_cannot_parse_it() -> None:
    sql = "EXPORT DATABASE '/tmp/dump'"
    assert str(refusal(sql)) == (
        "refused: EXPORT DATABASE statements are not allowed: only one read query "
        f"(SELECT / WITH) may run at {sql!r}"
    )
    with pytest.raises(SandboxViolation, match=r"^refused: EXPORT DATABASE statements"):
        check_statements(sql)


def test_a_statement_that_does_not_parse_is_still_a_parse_error() -> None:
    assert refusal("SELECT (1 FROM runs").reason.startswith("cannot parse as DuckDB SQL")
    check_statements("SELECT (1 FROM runs")  # nothing the tokens alone can show


@pytest.mark.parametrize(
    ("sql", "offset", "named"),
    [
        ("SELECT run_id, 1.0 AS value FROM runs；", 37, "'；' (U+FF1B FULLWIDTH SEMICOLON)"),
        ("SELECT 1；SELECT 2", 8, "'；' (U+FF1B FULLWIDTH SEMICOLON)"),
        ("SELECT count（*） FROM runs", 12, "'（' (U+FF08 FULLWIDTH LEFT PARENTHESIS)"),
        ("SELECT 1 ， 2", 9, "'，' (U+FF0C FULLWIDTH COMMA)"),
        (
            "SELECT run_id FROM runs WHERE run_id = ‘x’",
            39,
            "'‘' (U+2018 LEFT SINGLE QUOTATION MARK)",
        ),
        ("SELECT 1 \u037e", 9, "'\u037e' (U+037E GREEK QUESTION MARK)"),
    ],
)
def test_a_look_alike_character_is_named_with_its_code_point_and_offset(
    sql: str, offset: int, named: str
) -> None:
    violation = refusal(sql)
    assert violation.reason.startswith(f"character {named} at offset {offset}: not SQL; use ")
    assert violation.span == (offset, offset + 1)


def test_the_full_width_semicolon_message() -> None:
    violation = refusal("SELECT 1；")
    assert (
        violation.reason
        == "character '；' (U+FF1B FULLWIDTH SEMICOLON) at offset 8: not SQL; use ';'"
    )
    with pytest.raises(SandboxViolation, match="U\\+FF1B FULLWIDTH SEMICOLON"):
        check_statements("SELECT 1；")


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT run_id FROM runs WHERE run_id = '；'",
        'SELECT run_id AS "value；" FROM runs',
        "SELECT run_id FROM runs -- ；\n",
        "SELECT run_id /* （） */ FROM runs",
        "SELECT run_id FROM runs WHERE run_id = $$‘x’$$",
    ],
    ids=["string", "quoted_name", "line_comment", "block_comment", "dollar_string"],
)
def test_look_alikes_in_strings_names_and_comments_are_data(sql: str) -> None:
    guard_sql(sql, CATALOG)
