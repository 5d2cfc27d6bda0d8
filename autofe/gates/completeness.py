"""The completeness gate: the feature's SQL can be computed, cheaply, well and repeatably.

Checks run cheapest first and stop at the first structural failure (there is no point running
a query that does not parse or names a column the warehouse lacks): parse, qualify every
table and column against the warehouse schema, then one dry run over all runs for shape,
value type, cost and coverage, and a second run for determinism.
"""

from __future__ import annotations

import difflib
import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from sqlglot import exp
from sqlglot.errors import ParseError, SqlglotError
from sqlglot.optimizer.qualify import qualify

from autofe.errors import SandboxViolation
from autofe.featurespec import FeatureSpec, ValueType
from autofe.gates.codes import Completeness
from autofe.gates.context import GateContext, GateSettings, Reason
from autofe.modeling.quality import applicable_coverage
from autofe.sandbox.guard import guard_sql, in_cte_scope, node_span
from autofe.sandbox.nesting import NestedTooDeeply, parse_statements
from autofe.sandbox.rewrite import check_rewritable
from autofe.sandbox.session import LimitExceeded, QueryError, QueryResult, Sandbox
from autofe.sandbox.statements import check_characters, check_statements
from autofe.warehouse.catalog import WarehouseCatalog

GATE = "completeness"
DIALECT = "duckdb"

INTEGER_TYPES = frozenset(
    {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT"}
    | {"UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT", "UHUGEINT"}
)
NUMERIC_TYPES = INTEGER_TYPES | {"FLOAT", "DOUBLE", "DECIMAL", "REAL"}
ALLOWED_TYPES: dict[str, frozenset[str]] = {
    "DOUBLE": NUMERIC_TYPES,
    "BIGINT": INTEGER_TYPES,
    "INTEGER": INTEGER_TYPES,
    "BOOLEAN": frozenset({"BOOLEAN"}),
    "VARCHAR": frozenset({"VARCHAR"}),
}

REL_TOL = 1e-9


def _reason(code: Completeness, message: str, **where: Any) -> Reason:
    return Reason(GATE, str(code), message, **where)


def check_completeness(spec: FeatureSpec, ctx: GateContext) -> list[Reason]:
    """Reasons the feature cannot be computed well; an empty list admits it.

    Args:
        spec: the feature; its SQL must return ``(run_id, value)``.
        ctx: the warehouse (opened read-only in the sandbox) and the thresholds.

    Returns:
        One reason per failure. Structural failures (parse, sandbox, unknown table or
        column, a failed query, wrong shape) end the check early.
    """
    statements, unreadable = _parse(spec.sql)
    if unreadable:
        return unreadable
    tree = statements[0] if len(statements) == 1 else None
    query = tree if isinstance(tree, exp.Query) else None  # else the guard names its kind
    structural = (
        (_unknown_tables(spec.sql, query, ctx.catalog) if query is not None else [])
        or _refused(spec.sql, ctx.catalog)
        or _unknown_columns(query, ctx.catalog)
    )
    if structural:
        return structural
    with Sandbox.open(ctx.db, ctx.settings.limits) as sandbox:
        return _dry_run(spec, ctx.settings, sandbox)


def _parse(sql: str) -> tuple[list[exp.Expr | None], list[Reason]]:
    """The statements, or why the text cannot be read as SQL.

    A look-alike character (``；`` for ``;``) is named before sqlglot tries, which would only
    say "Invalid expression" or take it for a name; a statement sqlglot cannot parse is named by
    its leading keywords when they say what it is (``EXPORT DATABASE``): refused either way,
    with a reason that says why. Nesting too deep to walk, or to parse back once rewritten, is
    refused by the sandbox's depth check, and the reason marks the SQL unreadable, so later
    gates do not walk it either.
    """
    try:
        check_characters(sql)
        statements = parse_statements(sql)
        if len(statements) == 1 and isinstance(statements[0], exp.Query):
            check_rewritable(statements[0], sql)  # the leakage check runs its rewrites
        return statements, []
    except SandboxViolation as exc:
        unreadable = exc.reason if isinstance(exc, NestedTooDeeply) else None
        message = unreadable or f"SQL does not parse: {exc.reason}"
        return [], [
            _reason(Completeness.PARSE_ERROR, message, span=exc.span, unreadable=unreadable)
        ]
    except ParseError as exc:
        return [], [_named_statement(sql) or _parse_reason(sql, exc)]
    except SqlglotError as exc:  # the tokenizer's (an unterminated string): no position kept
        return [], [_reason(Completeness.PARSE_ERROR, f"SQL does not parse: {exc}")]


def _named_statement(sql: str) -> Reason | None:
    """The guard's refusal of text it can judge from its tokens (several statements, a kind
    that is no query), which says more than the parser's complaint."""
    try:
        check_statements(sql)
    except SandboxViolation as exc:
        return _reason(
            Completeness.SANDBOX, f"sandbox refused the query: {exc.reason}", span=exc.span
        )
    return None


def _parse_reason(sql: str, exc: ParseError) -> Reason:
    """The parser's first complaint, pointing at where it happened."""
    first = exc.errors[0] if exc.errors else {}
    message = f"SQL does not parse: {first.get('description') or exc}"
    span = _span_at(sql, first.get("line"), first.get("col"), str(first.get("highlight") or ""))
    return _reason(Completeness.PARSE_ERROR, message, span=span)


def _span_at(sql: str, line: int | None, col: int | None, text: str) -> tuple[int, int] | None:
    """Character offsets of ``text`` ending at 1-based ``line``/``col`` (sqlglot's convention).

    >>> _span_at("SELECT\\n(1", 2, 2, "1")
    (8, 9)
    """
    if not line or not col:
        return None
    lines = sql.split("\n")
    end = sum(len(row) + 1 for row in lines[: line - 1]) + col
    return (max(0, end - max(len(text), 1)), min(end, len(sql)))


def _unknown_tables(sql: str, tree: exp.Expr, catalog: WarehouseCatalog) -> list[Reason]:
    """Tables of the main schema that are neither warehouse tables nor CTEs in scope.

    Checked before the columns (with an unknown table every column looks unresolvable) and
    before the guard, which would refuse them as a policy matter rather than a typo.
    """
    known = catalog.tables()
    reasons = []
    for table in tree.find_all(exp.Table):
        span = node_span(table)
        if (
            table.catalog
            or table.db.lower() not in ("", "main")
            or not isinstance(table.this, exp.Identifier)
            or (span is not None and sql[span[0]] == "'")  # a file read: the guard's business
            or table.name.lower() in known
            or in_cte_scope(table)
        ):
            continue
        message = f"table {table.name!r} is not in the warehouse; tables: " + ", ".join(
            sorted(known)
        )
        reasons.append(_reason(Completeness.UNKNOWN_TABLE, message, span=span))
    return reasons


def _refused(sql: str, catalog: WarehouseCatalog) -> list[Reason]:
    """The sandbox's parsing guard: one read query, warehouse tables, allowed functions."""
    try:
        guard_sql(sql, catalog)
    except SandboxViolation as exc:
        return [
            _reason(Completeness.SANDBOX, f"sandbox refused the query: {exc.reason}", span=exc.span)
        ]
    return []


_UNRESOLVED = re.compile(r"Column '(?P<a>[^']+)' could not be resolved|Unknown column: (?P<b>\S+)")


def _unknown_columns(tree: exp.Expr | None, catalog: WarehouseCatalog) -> list[Reason]:
    """Columns sqlglot's optimizer cannot resolve against the warehouse schema."""
    if tree is None:
        return []
    try:
        schema: dict[str, object] = dict(catalog.schema)
        qualify(
            tree.copy(),
            schema=schema,
            dialect=DIALECT,
            validate_qualify_columns=True,
        )
    except SqlglotError as exc:
        return [_column_reason(tree, catalog, str(exc))]
    return []


def _column_reason(tree: exp.Expr, catalog: WarehouseCatalog, error: str) -> Reason:
    """Name the column, point at it and suggest the nearest warehouse column."""
    found = _UNRESOLVED.search(error)
    name = (found.group("a") or found.group("b")).strip('"') if found else None
    if name is None:
        return _reason(Completeness.UNKNOWN_COLUMN, f"columns do not resolve: {error}")
    node = next((c for c in tree.find_all(exp.Column) if c.name == name), None)
    columns = sorted({column for _, column in catalog.columns})
    close = difflib.get_close_matches(name, columns, n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    message = f"column {name!r} is not in the tables the query reads{hint}"
    span = node_span(node) if node is not None else None
    return _reason(Completeness.UNKNOWN_COLUMN, message, span=span, column=name)


def _run(sandbox: Sandbox, sql: str) -> tuple[QueryResult | None, list[Reason]]:
    """Run ``sql`` in the sandbox; a refusal, timeout or SQL error becomes a reason."""
    try:
        return sandbox.query(sql), []
    except LimitExceeded as exc:  # the timeout or the memory limit: a cost, not a policy
        message = f"the dry run was stopped: {exc.reason}"
        return None, [_reason(Completeness.OVER_BUDGET, message, stopped_by=exc.limit)]
    except SandboxViolation as exc:
        return None, [_reason(Completeness.SANDBOX, f"sandbox stopped the query: {exc.reason}")]
    except QueryError as exc:
        return None, [_reason(Completeness.FAILED, f"query failed: {exc.message}")]


def _dry_run(spec: FeatureSpec, settings: GateSettings, sandbox: Sandbox) -> list[Reason]:
    """Run the feature over every run: shape, type, cost, coverage, then determinism."""
    first, failed = _run(sandbox, spec.sql)
    if first is None:
        return failed
    shape = _shape(first)
    if shape:
        return shape
    jobs = _run_jobs(sandbox)
    reasons = [
        *_duplicates(first),
        *_value_type(first, spec.value_type),
        *_budget(first, len(jobs), settings),
        *_coverage(first, jobs, settings),
    ]
    if any(r.code == Completeness.OVER_BUDGET for r in reasons):
        return reasons  # a second run would cost as much again
    second, failed = _run(sandbox, spec.sql)
    return reasons + (failed if second is None else _determinism(first, second))


def _run_jobs(sandbox: Sandbox) -> dict[Any, str]:
    """Every run's job ('' for runs of no job)."""
    result = sandbox.query("SELECT run_id, coalesce(job_id, '') FROM runs")
    return {row[0]: row[1] for row in result.rows}


def _shape(result: QueryResult) -> list[Reason]:
    """Exactly ``(run_id, value)``; anything else cannot be joined to the run table."""
    columns = list(result.columns)
    if len(columns) == 2 and columns[0].lower() == "run_id" and not result.truncated:
        return []
    if result.truncated:
        message = f"the query returns more than {len(result.rows)} rows: one row per run expected"
    else:
        message = f"the query must return exactly (run_id, value); it returns {columns}"
    return [_reason(Completeness.SHAPE, message)]


def _duplicates(result: QueryResult) -> list[Reason]:
    counts = Counter(row[0] for row in result.rows)
    repeated = [run_id for run_id, n in counts.items() if n > 1]
    if not repeated:
        return []
    message = (
        f"{len(repeated)} run_ids appear more than once (e.g. {repeated[0]!r} "
        f"{counts[repeated[0]]} times): one row per run"
    )
    return [_reason(Completeness.DUPLICATE_RUN_ID, message)]


def _value_type(result: QueryResult, wanted: ValueType) -> list[Reason]:
    got = str(result.types[1])
    if type_family(got) in ALLOWED_TYPES[wanted]:
        return []
    message = f"value has type {got}, not compatible with the declared {wanted}: cast it"
    return [_reason(Completeness.VALUE_TYPE, message)]


def type_family(type_name: str) -> str:
    """A DuckDB type name without its parameters.

    >>> type_family("DECIMAL(18,3)")
    'DECIMAL'
    """
    return type_name.split("(", 1)[0].strip().upper()


def seconds_per_1000(seconds: float, runs: int) -> float:
    """Dry-run time scaled to 1 000 runs.

    Small warehouses count as 1 000 runs: their fixed query overhead is not a per-run cost.

    >>> seconds_per_1000(3.0, 6000)
    0.5
    >>> seconds_per_1000(0.2, 10)
    0.2
    """
    return seconds * 1000 / max(runs, 1000)


def _budget(result: QueryResult, runs: int, settings: GateSettings) -> list[Reason]:
    cost = seconds_per_1000(result.seconds, runs)
    if cost <= settings.budget_s_per_1000_runs:
        return []
    message = (
        f"took {result.seconds:.2f} s for {runs} runs = {cost:.2f} s per 1 000 runs, "
        f"over the budget of {settings.budget_s_per_1000_runs} s"
    )
    return [_reason(Completeness.OVER_BUDGET, message)]


def _coverage(result: QueryResult, jobs: dict[Any, str], settings: GateSettings) -> list[Reason]:
    """Share of runs with a non-null value among the runs of the jobs it applies to; runs
    missing from the output count as null (see :func:`applicable_coverage`)."""
    covered = {row[0] for row in result.rows if row[1] is not None and row[0] in jobs}
    n_covered, applicable = applicable_coverage(covered, jobs)
    share = n_covered / applicable if applicable else 0.0
    if share >= settings.min_coverage:
        return []
    n_jobs = len({jobs[r] for r in covered})
    message = (
        f"only {n_covered} of the {applicable} runs of the {n_jobs} jobs it gives a value for "
        f"({share:.1%}) get a non-null value; at least {settings.min_coverage:.0%} needed"
    )
    return [_reason(Completeness.LOW_COVERAGE, message)]


def _determinism(first: QueryResult, second: QueryResult) -> list[Reason]:
    """Both runs agree row for row (sorted by run_id; floats within a relative 1e-9)."""
    a, b = _sorted_rows(first.rows), _sorted_rows(second.rows)
    if len(a) == len(b) and all(same_row(x, y) for x, y in zip(a, b, strict=True)):
        return []
    diff = next(((x, y) for x, y in zip(a, b, strict=False) if not same_row(x, y)), None)
    detail = f"e.g. {diff[0]!r} then {diff[1]!r}" if diff else f"{len(a)} rows then {len(b)}"
    message = (
        f"two runs gave different results ({detail}): avoid random(), now(), "
        "LIMIT or ANY_VALUE without a total ORDER BY"
    )
    return [_reason(Completeness.NONDETERMINISTIC, message)]


def _sorted_rows(rows: Sequence[Sequence[Any]]) -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in rows), key=lambda r: (str(r[0]), _order_key(r[1])))


def _order_key(value: Any) -> tuple[int, str]:
    return (0, "") if value is None else (1, repr(value))


def same_value(a: Any, b: Any) -> bool:
    """Equal, floats within a relative tolerance (and NaN equal to NaN).

    >>> same_value(0.1 + 0.2, 0.3), same_value(None, 0.0), same_value(1.0, 1.001)
    (True, False, False)
    """
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return False
        fa, fb = float(a), float(b)
        return (math.isnan(fa) and math.isnan(fb)) or math.isclose(fa, fb, rel_tol=REL_TOL)
    return bool(a == b)


def same_row(a: Sequence[Any], b: Sequence[Any]) -> bool:
    return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b, strict=True))
