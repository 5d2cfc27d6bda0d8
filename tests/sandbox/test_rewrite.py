"""Structure keys: features that differ only in constants share one, quietly."""

from __future__ import annotations

import logging

import pytest

from autofe.sandbox.rewrite import structure_key


def test_a_structure_key_of_a_regexp_feature_warns_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A placeholder where DuckDB wants literal regexp flags is fine in a key (it is never run):
    sqlglot's warning about it used to print after every ``autofe run``."""
    sql = "SELECT run_id, regexp_replace(script_text, '\\s+', ' ', 'g') AS value FROM runs"
    with caplog.at_level(logging.WARNING, logger="sqlglot"):
        key = structure_key(sql)
    assert key.startswith("SELECT run_id, REGEXP_REPLACE(script_text, ?")
    assert key == structure_key(sql.replace("' '", "''"))
    assert caplog.records == []


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT run_id, " + "(" * 5000 + "1" + ")" * 5000 + " AS value FROM runs",
        "SELECT run_id, 1" + "::DOUBLE" * 400 + " AS value FROM runs",
    ],
    ids=["parens", "casts"],
)
def test_a_structure_key_of_sql_nested_too_deeply_is_its_text(sql: str) -> None:
    """``autofe run`` keys every proposal; one too deep to walk must not end the run."""
    assert structure_key(sql) == sql  # on d2aa5f7: RecursionError


def test_a_structure_key_of_several_statements_keeps_them_all() -> None:
    assert structure_key("SELECT 1; SELECT 'a'") == "SELECT ?; SELECT ?"
