"""The gates in sequence: a query a limit stopped once is not run again by a later gate."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from autofe.featurespec import FeatureSpec
from autofe.gates import GateContext, GateSettings, run_gates
from autofe.sandbox.limits import SandboxLimits
from autofe.sandbox.session import QueryResult, Sandbox

CROSS_JOIN = """
SELECT a.run_id, count(*)::DOUBLE AS value
FROM runs AS a, runs AS b, runs AS c
WHERE b.submit_time < a.submit_time AND c.submit_time < b.submit_time
GROUP BY a.run_id
"""
"""Leakage-safe (earlier runs only) but ~10^10 row triples: far past a small timeout."""

OWN_LABEL_CROSS_JOIN = """
SELECT a.run_id, max(a.duration_s + b.duration_s)::DOUBLE AS value
FROM runs AS a, runs AS b
GROUP BY a.run_id
"""
"""Leaky (it reads the target's own label) as well as slow."""


@pytest.fixture(scope="module")
def ctx(gates_warehouse: Path) -> GateContext:
    return GateContext.load(gates_warehouse)


def spec(sql: str) -> FeatureSpec:
    return FeatureSpec(name="f", sql=sql, category="history")


@pytest.fixture
def executed(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every statement any sandbox runs (the gates' own and the worlds'), in order."""
    seen: list[str] = []
    query, query_renamed = Sandbox.query, Sandbox.query_renamed

    def spy(self: Sandbox, sql: str, limit: int | None = None) -> QueryResult:
        seen.append(sql)
        return query(self, sql, limit)

    def spy_renamed(self: Sandbox, sql: str, *rest: Any) -> QueryResult:
        seen.append(sql)
        return query_renamed(self, sql, *rest)

    monkeypatch.setattr(Sandbox, "query", spy)
    monkeypatch.setattr(Sandbox, "query_renamed", spy_renamed)
    yield seen


def test_a_query_stopped_by_the_timeout_is_run_once(ctx: GateContext, executed: list[str]) -> None:
    quick = dataclasses.replace(ctx, settings=GateSettings(limits=SandboxLimits(timeout_s=0.2)))
    verdict = run_gates(spec(CROSS_JOIN), quick)
    assert [(r.gate, r.code) for r in verdict.reasons] == [("completeness", "over_budget")]
    assert "the dry run was stopped: query exceeded the 0.2 s timeout" in verdict.reasons[0].message
    assert executed == [CROSS_JOIN]  # not again by the dynamic leakage check
    assert verdict.skipped == {
        "leakage": "dynamic check not run: the query already exceeded the 0.2 s timeout "
        "in the completeness gate",
        "cost": "not run: the query already exceeded the 0.2 s timeout in the completeness gate",
    }
    assert verdict.as_dict()["skipped"] == verdict.skipped


@pytest.mark.parametrize("limit", ["the 10 s timeout", "the 1GB memory limit"])
def test_a_stopped_query_still_gets_its_static_leakage_reasons(
    limit: str, ctx: GateContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    from autofe.sandbox.session import LimitExceeded

    executed: list[str] = []

    def stopped(self: Sandbox, sql: str, limit_rows: int | None = None) -> QueryResult:
        executed.append(sql)
        raise LimitExceeded(limit, sql)

    monkeypatch.setattr(Sandbox, "query", stopped)
    verdict = run_gates(spec(OWN_LABEL_CROSS_JOIN), ctx)
    said = [(r.gate, r.code) for r in verdict.reasons]
    assert said[0] == ("completeness", "over_budget") and ("leakage", "label_leak") in said
    assert verdict.reasons[0].message == f"the dry run was stopped: query exceeded {limit}"
    assert verdict.reasons[0].stopped_by == limit
    assert executed == [OWN_LABEL_CROSS_JOIN]
    assert verdict.skipped["leakage"].startswith(
        f"dynamic check not run: the query already exceeded {limit}"
    )


def test_a_query_that_runs_is_checked_in_the_perturbed_worlds_too(
    ctx: GateContext, executed: list[str]
) -> None:
    sql = "SELECT run_id, hour(submit_time)::DOUBLE AS value FROM runs"
    verdict = run_gates(spec(sql), ctx)
    assert verdict.accepted and verdict.skipped == {}
    assert executed.count(sql) == 2  # the dry run and the determinism run
    assert any("w0a_runs" in s for s in executed), "the dynamic check ran in no world"


def test_following_the_late_snapshot_advice_passes_every_gate(ctx: GateContext) -> None:
    fixture = (
        Path(__file__).parents[1] / "fixtures" / "leakage" / "reject_late_mean_all_snapshots.sql"
    )
    late = "\n".join(line for line in fixture.read_text().splitlines() if not line.startswith("--"))
    lenient = dataclasses.replace(ctx, settings=GateSettings(min_coverage=0.0))
    reasons = run_gates(spec(late), lenient).reasons
    assert {r.code for r in reasons} == {
        "late_snapshot",
        "perturbation",
    }  # statically and in a world
    reason = next(r for r in reasons if r.code == "late_snapshot")
    advised = re.search(r"; add (\S+ <= \S+) where those rows are read", reason.message)
    assert advised, reason.message
    fixed = late.replace("GROUP BY", f"WHERE {advised[1]}\nGROUP BY")
    verdict = run_gates(spec(fixed), lenient)
    assert verdict.accepted, [r.message for r in verdict.reasons]


DEEP_PARENS = "SELECT run_id, " + "(" * 5000 + "1" + ")" * 5000 + " AS value FROM runs"
"""Deeper than sqlglot's recursive parser can follow (it runs out of Python's stack)."""
DEEP_CASTS = "SELECT run_id, 1" + "::DOUBLE" * 400 + " AS value FROM runs"
"""Parsed in a loop into a 403-level tree that printing it back (the dynamic check) overflows."""
CAST_CHAIN = "SELECT run_id, hour(submit_time)" + "::DOUBLE" * 95 + " AS value FROM runs"
"""Parses (100 levels), but its rewrites for the worlds render 95 nested CAST() calls, 103 levels
that the guard would refuse: on d2aa5f7 a 60-cast chain, whose rewrite the pure-Python parser could
not follow, was accepted with the dynamic check refused in every world (fail-open)."""
SHORTER_CAST_CHAIN = "SELECT run_id, hour(submit_time)" + "::DOUBLE" * 60 + " AS value FROM runs"
"""Its rewrites render 60 nested CAST() calls, which the compiled parser (sqlglotc) follows."""
DEEP_WHERE = "SELECT run_id, 1.0 AS value FROM runs WHERE " + " AND ".join(["job_id <> 'x'"] * 1000)
"""A 1 004-level ``AND`` chain: the static check splits its conjuncts recursively."""


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        (DEEP_PARENS, "statement nested too deeply to check"),
        (DEEP_CASTS, "statement nested too deeply to check: 403 levels, at most 100"),
        (CAST_CHAIN, "statement nested too deeply to check"),
        (DEEP_WHERE, "statement nested too deeply to check: 1004 levels, at most 100"),
    ],
    ids=["parens", "casts", "cast_chain", "and_chain"],
)
def test_sql_nested_too_deeply_is_rejected_by_the_parse_and_walked_by_no_gate(
    sql: str, reason: str, ctx: GateContext, executed: list[str]
) -> None:
    verdict = run_gates(spec(sql), ctx)  # d2aa5f7: RecursionError; cast_chain accepted
    assert [(r.gate, r.code, r.message) for r in verdict.reasons] == [
        ("completeness", "parse_error", reason)
    ]
    not_read = f"not run: the completeness gate could not read the SQL ({reason})"
    assert verdict.skipped == {"leakage": not_read, "cost": not_read}
    assert executed == []  # refused before the sandbox or a world ran anything
    assert verdict.as_dict()["reasons"] == [
        {"gate": "completeness", "code": "parse_error", "message": reason}
        | {"span": None, "column": None}
    ]


def test_a_cast_chain_whose_rewrites_parse_back_is_checked_in_every_world(
    ctx: GateContext, executed: list[str]
) -> None:
    verdict = run_gates(spec(SHORTER_CAST_CHAIN), ctx)  # d2aa5f7: no world could run it
    assert verdict.accepted, [r.message for r in verdict.reasons]
    assert verdict.skipped == {}
    worlds = [sql for sql in executed if "w0a_runs" in sql]
    assert worlds, "the dynamic check ran in no world"
    assert all(sql.count("CAST(") == 60 for sql in worlds)  # the whole chain, in every world


def test_the_leakage_checks_alone_pass_over_sql_nested_too_deeply(ctx: GateContext) -> None:
    from autofe.gates.leakage import check_leakage

    for sql in (DEEP_PARENS, DEEP_CASTS, DEEP_WHERE):
        assert check_leakage(spec(sql), ctx) == []  # the completeness gate says why


def test_a_deep_but_checkable_query_still_passes(ctx: GateContext) -> None:
    sql = (
        "SELECT run_id, "
        + "abs(" * 20
        + "hour(submit_time)"
        + ")" * 20
        + "::DOUBLE AS value FROM runs"
    )
    assert run_gates(spec(sql), ctx).accepted
