"""Profile a Spark SQL or PySpark job script into the facts that drive its runtime.

Pure and static: SQL is parsed with sqlglot (Spark dialect, then Databricks, then DuckDB) and
Python with the stdlib ``ast``; nothing is executed, imported or connected to. ``tools/server.py``
wraps :func:`profile_script` as the MCP tool of the same name, so every list is capped at
:data:`MAX_ITEMS` and every string clipped at :data:`MAX_CHARS`: one huge script must not flood
the model reading the answer.

Where the facts are heuristic, and why (there is no catalog to ask):

* Unqualified columns in multi-table queries are attributed to a table by the columns a CTE or
  derived table is known to produce, then by the prefix naming convention (``c_custkey`` →
  ``customer``, ``ss_sold_date_sk`` → ``store_sales``) when exactly one table fits; otherwise the
  join side stays ``None``.
* Comma joins and ``CROSS JOIN`` count as ``inner`` when a WHERE equality links the two sides
  (Spark plans them so), else as ``cross``. Equalities reaching out of a subquery are joins of
  kind ``correlated``.
* Date ranges hold inclusive first and last days; ``days`` counts whole days (the partitions of a
  daily-partitioned table) and is ``None`` when an end is open or not literal. Relative bounds
  (``current_date - 7 days``) and template parameters (``${ds}``) are kept as written.
"""

from __future__ import annotations

import ast
import calendar
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import date, timedelta
from typing import Annotated, Literal, TypeVar

import sqlglot
from pydantic import AfterValidator, BaseModel, ConfigDict
from sqlglot import TokenType, exp
from sqlglot.errors import ParseError, TokenError

from autofe.errors import ConfigError

MAX_ITEMS = 200
"""Longest list a profile carries; the rest is dropped with a warning."""

MAX_CHARS = 200
"""Longest string a profile carries (table names, literals, warnings)."""

MAX_VALUES = 20
"""Most literal values kept for one filter (a 5,000-item ``IN`` list says little more)."""

_DIALECTS = ("spark", "databricks", "duckdb")


def _clip(text: str) -> str:
    """Cut ``text`` to :data:`MAX_CHARS`, marking the cut.

    >>> _clip("x" * 300)[-3:], len(_clip("x" * 300))
    ('...', 200)
    """
    return text if len(text) <= MAX_CHARS else text[: MAX_CHARS - 3] + "..."


Text = Annotated[str, AfterValidator(_clip)]
T = TypeVar("T")
JoinKind = Literal[
    "inner", "left", "right", "full", "cross", "left_semi", "left_anti", "correlated"
]


_FROZEN = ConfigDict(frozen=True, use_attribute_docstrings=True)


class JoinFact(BaseModel):
    """One join: which tables meet on which ``(left, right)`` key expressions."""

    model_config = _FROZEN

    kind: JoinKind
    """``correlated``: an equality reaching out of a subquery (EXISTS, scalar subquery)."""
    left: Text | None
    """Table, CTE or subquery alias as written; None when no table could be attributed."""
    right: Text | None
    keys: list[tuple[Text, Text]]
    """Equi-join keys, left column first; empty for cross joins."""
    broadcast: bool = False
    """A broadcast hint (``/*+ BROADCAST(t) */``, ``F.broadcast(df)``) covers a side."""


class FilterFact(BaseModel):
    """One predicate comparing a column with literals; partition-like columns drive pruning."""

    model_config = _FROZEN

    column: Text
    table: Text | None
    operator: Text
    """``=``, ``<``, ``between``, ``in``, ``like``, ``is null``..., ``not `` prefixed if negated."""
    values: list[Text]
    """Literals as text: dates folded to ISO, parameters as written, at most 20 plus a count."""
    partition_like: bool
    """Named like a partition column (``dt``, ``ds``, ``*_date``, ``year``, ``partition``...)."""


class DateRange(BaseModel):
    """The days a column is restricted to: inclusive ``start``/``end``, ``days`` between them."""

    model_config = _FROZEN

    column: Text
    table: Text | None
    start: Text | None
    """First day let through (ISO), or relative/parameter text; None when open."""
    end: Text | None
    """Last day let through (ISO), or relative/parameter text; None when open."""
    days: int | None
    """Whole days from start to end inclusive; None when an end is open or not literal."""


class ScriptProfile(BaseModel):
    """What a script reads, writes and computes, as far as reading it (not running it) tells."""

    model_config = _FROZEN

    language: Literal["sql", "python"]
    statements: int
    """SQL statements parsed; for Python, statements that do something (not imports/defs)."""
    tables_read: list[Text]
    """Tables and paths as written, sorted; CTEs, views and temp views left out."""
    tables_written: list[Text]
    joins: list[JoinFact]
    filters: list[FilterFact]
    date_ranges: list[DateRange]
    aggregations: list[Text]
    """Aggregate functions in Spark spelling (``count_distinct`` for COUNT(DISTINCT))."""
    group_by_columns: int
    """Grouping columns summed over every GROUP BY / groupBy."""
    window_functions: list[Text]
    distinct: bool
    """SELECT DISTINCT, UNION/INTERSECT/EXCEPT without ALL, distinct()/dropDuplicates()."""
    order_by: bool
    """A global ORDER BY / orderBy / sort (window ordering does not count)."""
    udfs: list[Text]
    """SQL: functions sqlglot does not know; Python: ``kind:name`` (``pandas_udf:score``)."""
    ml_estimators: list[Text]
    """MLlib (and Spark XGBoost/LightGBM) estimator classes constructed."""
    subqueries: int
    """Derived tables, scalar/IN subqueries and EXISTS."""
    ctes: int
    unions: int
    literals: dict[Text, list[Text]]
    """Notable literals by kind: dates, numbers (in filters), limit, ml_params, spark_conf..."""
    parameters: list[Text]
    """Inputs as written: ``${x}``, ``{{ x }}``, ``:x``, widgets, ``sys.argv[i]``, env vars."""
    warnings: list[Text]
    """What could not be read (and was skipped), and lists that were cut."""


# --------------------------------------------------------------------------- accumulation


_TOKEN_RE = re.compile(r"__autofe_p\d+__")


@dataclass
class _Params:
    """Template placeholders swapped for identifiers sqlglot can parse, and the way back."""

    displays: dict[str, str] = field(default_factory=dict)
    tokens: dict[str, str] = field(default_factory=dict)
    used: dict[str, None] = field(default_factory=dict)

    def token(self, display: str, *, parameter: bool = True) -> str:
        if parameter:
            self.used[_clip(display)] = None
        if display not in self.tokens:
            token = f"__autofe_p{len(self.tokens)}__"
            self.tokens[display] = token
            self.displays[token] = display
        return self.tokens[display]

    def display(self, token: str) -> str | None:
        return self.displays.get(token)

    def restore(self, text: str) -> str:
        return _TOKEN_RE.sub(lambda m: self.displays.get(m[0], m[0]), text)


@dataclass
class _Facts:
    """Everything found so far; turned into a :class:`ScriptProfile` once at the end."""

    params: _Params = field(default_factory=_Params)
    statements: int = 0
    read: dict[str, None] = field(default_factory=dict)
    written: dict[str, None] = field(default_factory=dict)
    views: set[str] = field(default_factory=set)
    joins: dict[str, JoinFact] = field(default_factory=dict)
    filters: dict[str, FilterFact] = field(default_factory=dict)
    ranges: dict[str, DateRange] = field(default_factory=dict)
    aggregations: set[str] = field(default_factory=set)
    group_by_columns: int = 0
    windows: set[str] = field(default_factory=set)
    distinct: bool = False
    order_by: bool = False
    udfs: set[str] = field(default_factory=set)
    ml_estimators: dict[str, None] = field(default_factory=dict)
    subqueries: int = 0
    ctes: int = 0
    unions: int = 0
    literals: dict[str, dict[str, None]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def literal(self, kind: str, value: str) -> None:
        self.literals.setdefault(kind, {})[_clip(value)] = None

    def add(self, fact: JoinFact | FilterFact | DateRange) -> None:
        key = fact.model_dump_json()
        if isinstance(fact, JoinFact):
            self.joins.setdefault(key, fact)
        elif isinstance(fact, FilterFact):
            self.filters.setdefault(key, fact)
        else:
            self.ranges.setdefault(key, fact)


# --------------------------------------------------------------------------- entry point


def profile_script(text: str, language: Literal["sql", "python", "auto"] = "auto") -> ScriptProfile:
    """Profile a Spark SQL script or a PySpark job without running it.

    Args:
        text: the script: one or more SQL statements, or a Python (PySpark) module.
        language: ``"auto"`` takes Python when the text parses as Python and imports something
            or uses ``spark.``/``dbutils.``, else SQL.

    Returns:
        The facts, every list capped at :data:`MAX_ITEMS`; what could not be read is in
        ``warnings``.

    Raises:
        ConfigError: the script is empty, or not one of its statements parses.

    >>> p = profile_script("SELECT dt, count(*) FROM db.events "
    ...                    "WHERE dt >= '2024-01-01' AND dt < '2024-02-01' GROUP BY dt")
    >>> p.tables_read, p.aggregations, p.group_by_columns, p.date_ranges[0].days
    (['db.events'], ['count'], 1, 31)
    """
    if _is_blank(text):
        raise ConfigError("script is empty")
    if language not in ("sql", "python", "auto"):
        raise ConfigError(f"language must be sql, python or auto, not {language!r}")
    chosen = _detect_language(text) if language == "auto" else language
    facts = _Facts()
    if chosen == "python":
        _profile_python(text, facts)
    else:
        _profile_sql_script(text, facts, pythonic=language == "auto" and _looks_pythonic(text))
    return _to_profile(chosen, facts)


_COMMENTS = re.compile(r"--[^\n]*|#[^\n]*|/\*.*?\*/", re.S)
_PYTHONIC = re.compile(
    r"^[ \t]*(import[ \t]+[\w.]+|from[ \t]+[\w.]+[ \t]+import\b)"
    r"|\b(spark|dbutils|sqlContext|sc)\s*\.\s*\w+(\s*\.\s*\w+)*\s*\(",
    re.M,
)


def _is_blank(text: str) -> bool:
    """True when nothing but whitespace and comments is left.

    >>> _is_blank("-- a\\n/* b */\\n# c\\n"), _is_blank("select 1 -- x")
    (True, False)
    """
    return not _COMMENTS.sub("", text).strip()


def _looks_pythonic(text: str) -> bool:
    """Imports, or calls on ``spark``/``dbutils`` (``SET spark.sql...`` in SQL is no call).

    >>> _looks_pythonic("from x import y"), _looks_pythonic("spark.read.table('t')")
    (True, True)
    >>> _looks_pythonic("select *\\nfrom\\n  t"), _looks_pythonic("SET spark.sql.x = 1")
    (False, False)
    """
    return bool(_PYTHONIC.search(text))


def _detect_language(text: str) -> Literal["sql", "python"]:
    """Python when the text parses as Python and looks like a Spark job.

    >>> _detect_language("import os\\nprint(1)"), _detect_language("SELECT 1")
    ('python', 'sql')
    """
    try:
        ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return "sql"
    return "python" if _looks_pythonic(text) else "sql"


def _to_profile(language: Literal["sql", "python"], facts: _Facts) -> ScriptProfile:
    def capped(name: str, items: Iterable[str]) -> list[str]:
        return _capped(name, sorted(items), facts)

    profile = ScriptProfile(
        language=language,
        statements=facts.statements,
        tables_read=capped("tables_read", (t for t in facts.read if t.lower() not in facts.views)),
        tables_written=capped("tables_written", facts.written),
        joins=_capped("joins", list(facts.joins.values()), facts),
        filters=_capped("filters", list(facts.filters.values()), facts),
        date_ranges=_capped("date_ranges", list(facts.ranges.values()), facts),
        aggregations=capped("aggregations", facts.aggregations),
        group_by_columns=facts.group_by_columns,
        window_functions=capped("window_functions", facts.windows),
        distinct=facts.distinct,
        order_by=facts.order_by,
        udfs=capped("udfs", facts.udfs),
        ml_estimators=_capped("ml_estimators", list(facts.ml_estimators), facts),
        subqueries=facts.subqueries,
        ctes=facts.ctes,
        unions=facts.unions,
        literals={k: _capped(k, list(v), facts) for k, v in sorted(facts.literals.items())},
        parameters=_capped("parameters", list(facts.params.used), facts),
        warnings=[],
    )
    return profile.model_copy(update={"warnings": [_clip(w) for w in facts.warnings[:MAX_ITEMS]]})


def _capped(name: str, items: list[T], facts: _Facts) -> list[T]:
    if len(items) > MAX_ITEMS:
        facts.warnings.append(f"{name}: {len(items)} found, first {MAX_ITEMS} kept")
    return items[:MAX_ITEMS]


# --------------------------------------------------------------------------- SQL: parsing

_TEMPLATE = re.compile(
    r"(?P<skip>--[^\n]*|/\*.*?\*/)"
    r"|(?P<quoted>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|`[^`]*`)"
    r"|(?P<param>\$\{[^{}\n]{1,100}\}|\{\{[^{}\n]{1,100}\}\}|(?<![\w:]):[A-Za-z_]\w*)",
    re.S,
)
_INNER_PARAM = re.compile(r"\$\{[^{}\n]{1,100}\}|\{\{[^{}\n]{1,100}\}\}")
_JINJA_BLOCK = re.compile(r"\{%.*?%\}|\{#.*?#\}", re.S)


def _substitute_parameters(sql: str, params: _Params) -> str:
    """Swap ``${x}``, ``{{ x }}`` and ``:x`` for identifiers so the parser does not choke.

    ``:x`` only counts outside quotes and comments (times like ``'10:30'``, casts ``a::int``).

    >>> p = _Params()
    >>> _substitute_parameters("SELECT * FROM t WHERE ds = '{{ds}}' AND n > :n -- :no", p)
    "SELECT * FROM t WHERE ds = '__autofe_p0__' AND n > __autofe_p1__ -- :no"
    >>> list(p.used)
    ['{{ ds }}', ':n']
    """

    def swap(match: re.Match[str]) -> str:
        if match["skip"]:
            return match[0]
        if match["quoted"]:
            return _INNER_PARAM.sub(lambda m: params.token(_param_display(m[0])), match[0])
        return params.token(_param_display(match[0]))

    return _TEMPLATE.sub(swap, sql)


def _param_display(raw: str) -> str:
    if raw.startswith("{{"):
        return "{{ " + raw[2:-2].strip() + " }}"
    return raw


def _profile_sql_script(text: str, facts: _Facts, *, pythonic: bool) -> None:
    errors = _profile_sql_text(text, facts)
    if facts.statements == 0:
        if pythonic:
            _profile_python(text, facts)
        first = errors[0] if errors else "no SQL statement found"
        raise ConfigError(f"SQL could not be parsed: {first}")
    facts.warnings.extend(f"statement skipped: {error}" for error in errors)


def _profile_sql_text(text: str, facts: _Facts) -> list[str]:
    """Add the facts of every statement that parses; return why the others did not."""
    if _JINJA_BLOCK.search(text):
        facts.warnings.append("template blocks {% ... %} were removed before parsing")
        text = _JINJA_BLOCK.sub(" ", text)
    sql = _substitute_parameters(text, facts.params)
    errors = []
    for line, chunk in _split_statements(sql):
        trees, error = _parse_chunk(chunk, line)
        if error:
            errors.append(facts.params.restore(error))
        for tree in trees:
            try:
                _add_statement(tree, facts, line)
            except RecursionError:
                facts.warnings.append(f"line {line}: statement nested too deeply to profile")
    return errors


def _split_statements(sql: str) -> list[tuple[int, str]]:
    """Statements with the line each starts on; semicolons in strings are kept.

    A statement is indented as far as it starts into its line, so error columns stay true.

    >>> _split_statements("select ';'; select 2;")
    [(1, "select ';'"), (1, '            select 2')]
    """
    try:
        tokens = sqlglot.tokenize(sql, read="spark")
    except (TokenError, ValueError):
        return [(1, sql)]
    chunks, start, first = [], 0, None
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            if first is not None:
                chunks.append((first, _indented(sql, start, token.start)))
            start, first = token.end + 1, None
        elif first is None:
            start, first = token.start, token.line
    if first is not None:
        chunks.append((first, _indented(sql, start, len(sql))))
    return chunks


def _indented(sql: str, start: int, end: int) -> str:
    column = start - (sql.rfind("\n", 0, start) + 1)
    return " " * column + sql[start:end]


def _parse_chunk(chunk: str, line: int) -> tuple[list[exp.Expr], str | None]:
    """Parse one statement, trying the dialects in turn; the first dialect's error is kept."""
    first_error = None
    for dialect in _DIALECTS:
        try:
            trees = [t for t in sqlglot.parse(chunk, read=dialect) if t is not None]
        except (ParseError, TokenError) as err:
            first_error = first_error or _error_text(err, line)
            continue
        except RecursionError:
            return [], f"line {line}: statement nested too deeply to parse"
        if trees and not any(_is_bare(t) for t in trees):
            return trees, None
        first_error = first_error or f"line {line}: not a SQL statement: {chunk.strip()}"
    return [], _clip(first_error or f"line {line}: could not parse")


def _is_bare(tree: exp.Expr) -> bool:
    """A lone expression (``hello world`` parses as ``hello AS world``) is not a statement."""
    return isinstance(tree, exp.Condition | exp.Alias | exp.Tuple | exp.Identifier)


_TOKEN_REPR = re.compile(r"<Token token_type: TokenType\.(\w+), text: (.*?), line: [^>]*>")


def _token_text(match: re.Match[str]) -> str:
    """sqlglot's ``<Token token_type: ..., text: x, ...>`` as a reader wants it: ``'x'``."""
    return "the end of the statement" if match[1] == "SENTINEL" else repr(match[2])


def _error_text(err: ParseError | TokenError, line: int) -> str:
    """``line L, col C: description`` with ``L`` counted in the whole script."""
    details = getattr(err, "errors", None) or [{}]
    info = details[0]
    description = _TOKEN_REPR.sub(_token_text, str(info.get("description") or str(err)))
    description = description.splitlines()[0] if description else "parse error"
    if info.get("line"):
        return f"line {info['line'] + line - 1}, col {info.get('col')}: {description}"
    return f"line {line}: {description}"


# --------------------------------------------------------------------------- SQL: statements


def _add_statement(tree: exp.Expr, facts: _Facts, line: int) -> None:
    facts.statements += 1
    if isinstance(tree, exp.Command):
        facts.warnings.append(f"line {line}: only the command name was understood: {tree.name}")
        return
    ctes = _cte_columns(tree)
    targets = _write_targets(tree)
    for target in targets:
        facts.written[_table_name(target, facts.params)] = None
    _add_reads(tree, targets, ctes, facts)
    _add_views(tree, facts)
    for node, scope in _scopes(tree, ctes, facts.params):
        _add_scope(node, scope, facts)
    if isinstance(tree, exp.Merge):
        _add_merge_join(tree, ctes, facts)
    _add_functions(tree, facts)
    _add_shape(tree, facts)


def _table_name(table: exp.Expr, params: _Params) -> str:
    """A table as written (catalog.db.name), parameters put back.

    >>> _table_name(sqlglot.parse_one("select * from c.d.t x").find(exp.Table), _Params())
    'c.d.t'
    """
    if isinstance(table, exp.Table):
        parts = [table.catalog, table.db, table.name]
        return params.restore(".".join(p for p in parts if p))
    if isinstance(table, exp.Directory) and isinstance(table.this, exp.Expr):
        return params.restore(table.this.name)
    return params.restore(table.sql(dialect="spark"))


def _cte_columns(tree: exp.Expr) -> dict[str, frozenset[str]]:
    """CTE name (lower case) → the columns it produces."""
    found = {}
    for cte in tree.find_all(exp.CTE):
        body = cte.this
        columns = list(body.named_selects) if isinstance(body, exp.Query) else []
        alias = cte.args.get("alias")
        if isinstance(alias, exp.TableAlias) and alias.columns:
            columns = [c.name for c in alias.columns]
        found[cte.alias.lower()] = frozenset(c.lower() for c in columns)
    return found


def _write_targets(tree: exp.Expr) -> list[exp.Expr]:
    """The tables (or directories) a statement writes: DML, COPY INTO and CREATE TABLE AS."""
    ctas = isinstance(tree, exp.Create) and _kind(tree) == "TABLE" and tree.args.get("expression")
    dml = isinstance(tree, exp.Insert | exp.Merge | exp.Update | exp.Delete | exp.Copy)
    if not (ctas or dml):
        return []
    target = tree.this
    if isinstance(target, exp.Schema):
        target = target.this
    return [target] if isinstance(target, exp.Expr) else []


def _kind(tree: exp.Create) -> str:
    return str(tree.args.get("kind") or "").upper()


def _add_views(tree: exp.Expr, facts: _Facts) -> None:
    """Views and cached tables are named queries: reading them later is not a table scan."""
    if (isinstance(tree, exp.Create) and _kind(tree) == "VIEW") or isinstance(tree, exp.Cache):
        target = tree.this.this if isinstance(tree.this, exp.Schema) else tree.this
        if isinstance(target, exp.Expr):
            facts.views.add(_table_name(target, facts.params).lower())


def _add_reads(
    tree: exp.Expr,
    targets: list[exp.Expr],
    ctes: dict[str, frozenset[str]],
    facts: _Facts,
) -> None:
    skip = {id(t) for t in targets}
    named = [tree.this] if isinstance(tree, exp.Create | exp.Cache) else []
    for node in [*named, *tree.find_all(exp.Hint)]:
        if isinstance(node, exp.Expr):
            skip.update(id(t) for t in node.find_all(exp.Table))
    for table in tree.find_all(exp.Table):
        if id(table) in skip or not isinstance(table.this, exp.Identifier):
            continue
        if not table.db and table.name.lower() in ctes:
            continue
        facts.read[_table_name(table, facts.params)] = None
    if isinstance(tree, exp.Copy):
        for path in tree.args.get("files") or []:
            facts.read[facts.params.restore(path.name)] = None


def _add_shape(tree: exp.Expr, facts: _Facts) -> None:
    facts.ctes += sum(1 for _ in tree.find_all(exp.CTE))
    facts.unions += sum(1 for _ in tree.find_all(exp.Union))
    facts.subqueries += sum(
        1 for s in tree.find_all(exp.Subquery) if not isinstance(s.parent, exp.SetOperation)
    )
    facts.subqueries += sum(1 for _ in tree.find_all(exp.Exists))
    facts.distinct |= any(s.args.get("distinct") for s in tree.find_all(exp.Select))
    facts.distinct |= any(s.args.get("distinct") for s in tree.find_all(exp.SetOperation))
    facts.order_by |= any(
        isinstance(o.parent, exp.Query) for o in tree.find_all(exp.Order) if o.parent
    )
    for limit in tree.find_all(exp.Limit):
        value = limit.expression
        if isinstance(value, exp.Literal) and not value.is_string:
            facts.literal("limit", value.this)


# --------------------------------------------------------------------------- SQL: functions

_NAME_ALIASES = {"mean": "avg", "approx_distinct": "approx_count_distinct"}


def _function_name(node: exp.Expr) -> str:
    """The Spark spelling of a function call, ``_distinct`` appended for DISTINCT arguments.

    >>> tree = sqlglot.parse_one("select count(distinct a), approx_count_distinct(b)", "spark")
    >>> [_function_name(f) for f in tree.expressions]
    ['count_distinct', 'approx_count_distinct']
    """
    if isinstance(node, exp.Anonymous | exp.AnonymousAggFunc):
        return str(node.name).lower()
    match = re.match(r"\s*([A-Za-z_][\w.]*)\s*\(", node.sql(dialect="spark"))
    name = match[1].lower() if match else node.key.lower()
    name = _NAME_ALIASES.get(name, name)
    return name + "_distinct" if isinstance(node.this, exp.Distinct) else name


def _windowed(node: exp.Expr) -> bool:
    parent = node.parent
    while isinstance(parent, exp.IgnoreNulls | exp.RespectNulls):
        parent = parent.parent
    return isinstance(parent, exp.Window) and (parent.this is node or parent.this is node.parent)


def _add_functions(tree: exp.Expr, facts: _Facts) -> None:
    for node in tree.find_all(exp.Func, exp.Window):
        if isinstance(node, exp.Window):
            inner = node.this
            while isinstance(inner, exp.IgnoreNulls | exp.RespectNulls):
                inner = inner.this
            facts.windows.add(_function_name(inner) if isinstance(inner, exp.Func) else "window")
        elif isinstance(node, exp.Anonymous | exp.AnonymousAggFunc):
            if isinstance(node.parent, exp.Dot):
                facts.udfs.add(node.parent.sql(dialect="spark").split("(")[0].lower())
            elif not isinstance(node.parent, exp.Table):
                facts.udfs.add(_function_name(node))
        elif isinstance(node, exp.AggFunc) and not _windowed(node):
            facts.aggregations.add(_function_name(node))


# --------------------------------------------------------------------------- SQL: scopes


@dataclass(frozen=True)
class _Source:
    """A FROM/JOIN item of one SELECT: how columns name it, and how the profile names it."""

    alias: str
    name: str
    columns: frozenset[str] | None
    base: bool


@dataclass
class _Scope:
    sources: list[_Source]
    outer: _Scope | None = None
    by_node: dict[int, _Source] = field(default_factory=dict)
    owners: dict[str, _Source] = field(default_factory=dict)

    def chain(self) -> Iterator[_Scope]:
        scope: _Scope | None = self
        while scope is not None:
            yield scope
            scope = scope.outer


def _scopes(
    tree: exp.Expr, ctes: dict[str, frozenset[str]], params: _Params
) -> list[tuple[exp.Expr, _Scope]]:
    """Every SELECT/UPDATE/DELETE with its sources, outer scopes known (BFS: parents first)."""
    built: dict[int, _Scope] = {}
    found: list[tuple[exp.Expr, _Scope]] = []
    for node in tree.find_all(exp.Select, exp.Update, exp.Delete):
        items = _scope_items(node)
        sources = {id(i): s for i in items if (s := _source(i, ctes, params))}
        scope = _Scope(list(sources.values()), _outer_scope(node, built), sources)
        scope.owners = _prefix_owners(node, scope.sources)
        built[id(node)] = scope
        found.append((node, scope))
    return found


def _scope_items(node: exp.Expr) -> list[exp.Expr]:
    if not isinstance(node, exp.Select):
        return [node.this] if isinstance(node.this, exp.Expr) else []
    first = node.args.get("from_") or node.args.get("from")
    items = [first.this] if isinstance(first, exp.From) else []
    return items + [join.this for join in node.args.get("joins") or []]


def _outer_scope(node: exp.Expr, built: dict[int, _Scope]) -> _Scope | None:
    """The scope a subquery may correlate with; CTEs and derived tables have none."""
    parent = node.parent
    while parent is not None:
        if isinstance(parent, exp.CTE):
            return None
        if isinstance(parent, exp.Subquery) and isinstance(parent.parent, exp.From | exp.Join):
            return None
        if id(parent) in built:
            return built[id(parent)]
        parent = parent.parent
    return None


def _source(item: exp.Expr, ctes: dict[str, frozenset[str]], params: _Params) -> _Source | None:
    if isinstance(item, exp.Table) and isinstance(item.this, exp.Identifier):
        name = _table_name(item, params)
        columns = None if item.db else ctes.get(item.name.lower())
        return _Source(item.alias_or_name.lower(), name, columns, columns is None)
    if isinstance(item, exp.Subquery):
        columns = frozenset(c.lower() for c in item.named_selects)
        return _Source(item.alias.lower(), item.alias or "(subquery)", columns, False)
    return None


def _resolve(column: exp.Column, scope: _Scope) -> _Source | None:
    """The source a column belongs to: by qualifier, known columns, then naming convention."""
    name, qualifier = column.name.lower(), column.table.lower()
    for current in scope.chain():
        if qualifier:
            found = [s for s in current.sources if s.alias == qualifier]
        else:
            found = _by_known_columns(name, current) or _by_prefix(
                name, current.sources, current.owners
            )
        if found:
            return found[0] if len(found) == 1 else None
    if not qualifier and len(scope.sources) == 1:
        return scope.sources[0]
    return None


def _by_known_columns(name: str, scope: _Scope) -> list[_Source]:
    return [s for s in scope.sources if s.columns is not None and name in s.columns]


def _by_prefix(column: str, sources: list[_Source], owners: dict[str, _Source]) -> list[_Source]:
    """Base tables whose name the column's prefix abbreviates, best-matching tier only.

    A tie goes to the tables that own no other prefix in the query: once ``inv_`` columns
    belong to inventory, ``i_`` columns belong to item.
    """
    named = [s for s in sources if s.base and column.startswith(_short(s.name) + "_")]
    prefix, _, rest = column.partition("_")
    if len(named) == 1 or not rest or not 1 <= len(prefix) <= 4:
        return named
    tiers = [(_prefix_tier(prefix, _short(s.name)), s) for s in sources if s.base]
    matched = [(tier, s) for tier, s in tiers if tier is not None]
    best = min((tier for tier, _ in matched), default=None)
    found = [s for tier, s in matched if tier == best]
    if len(found) > 1:
        taken = [s for p, s in owners.items() if p != prefix]
        found = [s for s in found if s not in taken] or found
    return found


def _prefix_owners(node: exp.Expr, sources: list[_Source]) -> dict[str, _Source]:
    """Column prefix → the one table it unambiguously abbreviates in this query."""
    owners = {}
    for name in sorted({c.name.lower() for c in node.find_all(exp.Column) if not c.table}):
        found = _by_prefix(name, sources, {})
        if len(found) == 1:
            owners[name.partition("_")[0]] = found[0]
    return owners


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1].lower()


def _prefix_tier(prefix: str, table: str) -> int | None:
    """How well a column prefix abbreviates a table name (0 best), None when it does not.

    >>> [_prefix_tier(p, t) for p, t in
    ...  [("ss", "store_sales"), ("d", "date_dim"), ("ps", "partsupp"), ("o", "lineitem")]]
    [0, 1, 2, None]
    """
    words = [w for w in table.split("_") if w]
    compact = "".join(words)
    if "".join(w[0] for w in words) == prefix:
        return 0
    if compact.startswith(prefix):
        return 1
    if compact[:1] == prefix[:1] and _is_subsequence(prefix, compact):
        return 2
    return None


def _is_subsequence(short: str, long: str) -> bool:
    rest = iter(long)
    return all(ch in rest for ch in short)


# --------------------------------------------------------------------------- SQL: joins


@dataclass
class _Pair:
    """One ``a = b`` between columns, each side with the source it was attributed to."""

    left: _Source | None
    left_key: str
    right: _Source | None
    right_key: str

    def swapped(self) -> _Pair:
        return _Pair(self.right, self.right_key, self.left, self.left_key)


@dataclass
class _Draft:
    kind: JoinKind
    left: _Source | None
    right: _Source | None
    keys: list[tuple[str, str]] = field(default_factory=list)

    def links(self, a: _Source, b: _Source) -> bool:
        return (self.left, self.right) in ((a, b), (b, a))


def _add_scope(node: exp.Expr, scope: _Scope, facts: _Facts) -> None:
    if isinstance(node, exp.Select):
        drafts = _explicit_joins(node, scope)
        drafts += _where_joins(node, scope, drafts)
        hinted = _broadcast_names(node)
        for draft in drafts:
            facts.add(_join_fact(draft, hinted, facts.params))
        group = node.args.get("group")
        if isinstance(group, exp.Group):
            facts.group_by_columns += _group_width(group)
    for condition in _conditions(node):
        _add_condition(condition, scope, facts)


def _conditions(node: exp.Expr) -> list[exp.Expr]:
    clauses = [node.args.get(k) for k in ("where", "having", "qualify")]
    found = [c.this for c in clauses if isinstance(c, exp.Expr)]
    for join in node.args.get("joins") or []:
        if _is_keyed(join) and isinstance(join.args.get("on"), exp.Expr):
            found.append(join.args["on"])
    return found


def _is_keyed(join: exp.Join) -> bool:
    """JOIN ... ON/USING (a comma join or CROSS JOIN is keyed by WHERE, if at all)."""
    on = join.args.get("on")
    trivial = on is None or (isinstance(on, exp.Boolean) and on.this is True)
    return bool(join.args.get("using")) or not trivial


def _join_kind(join: exp.Join) -> JoinKind:
    side, kind = (join.side or "").lower(), (join.kind or "").lower()
    if kind == "semi":
        return "left_semi"
    if kind == "anti":
        return "left_anti"
    if side == "left":
        return "left"
    if side == "right":
        return "right"
    if side == "full":
        return "full"
    return "cross" if kind == "cross" else "inner"


def _explicit_joins(select: exp.Select, scope: _Scope) -> list[_Draft]:
    drafts = []
    previous = scope.sources[0] if scope.sources else None
    for join in select.args.get("joins") or []:
        right = scope.by_node.get(id(join.this))
        if _is_keyed(join):
            drafts.append(_keyed_draft(join, right, previous, scope))
        previous = right or previous
    return drafts


def _keyed_draft(
    join: exp.Join, right: _Source | None, previous: _Source | None, scope: _Scope
) -> _Draft:
    using = join.args.get("using") or []
    if using:
        return _Draft(_join_kind(join), previous, right, [(u.name, u.name) for u in using])
    pairs = _equalities(join.args["on"], scope)
    pairs = [p.swapped() if right is not None and p.left == right else p for p in pairs]
    left = next((p.left for p in pairs if p.left is not None and p.left != right), previous)
    return _Draft(_join_kind(join), left, right, [(p.left_key, p.right_key) for p in pairs])


def _where_joins(select: exp.Select, scope: _Scope, drafts: list[_Draft]) -> list[_Draft]:
    """Joins stated in WHERE: comma joins, CROSS JOIN + equality, correlated subqueries."""
    where = select.args.get("where")
    pairs = _equalities(where.this, scope) if isinstance(where, exp.Where) else []
    found: list[_Draft] = []
    unresolved = False
    for pair in (_fill_in(p, scope) for p in pairs):
        if pair.left is None or pair.right is None:
            found.append(_Draft("inner", pair.left, pair.right, [(pair.left_key, pair.right_key)]))
            unresolved = True
        elif pair.left != pair.right:
            _link(
                pair.left, pair.right, (pair.left_key, pair.right_key), scope, drafts + found, found
            )
    if not unresolved:
        found += _cross_joins(select, scope, drafts + found)
    return found


def _link(
    left: _Source,
    right: _Source,
    key: tuple[str, str],
    scope: _Scope,
    known: list[_Draft],
    found: list[_Draft],
) -> None:
    """Add ``key`` to the join of ``left`` and ``right``, outer and earlier sources on the left."""
    order = [s for current in reversed(list(scope.chain())) for s in current.sources]
    if order.index(left) > order.index(right):
        left, right, key = right, left, (key[1], key[0])
    for draft in known:
        if draft.links(left, right):
            draft.keys.append(key if draft.left == left else (key[1], key[0]))
            return
    local = left in scope.sources and right in scope.sources
    found.append(_Draft("inner" if local else "correlated", left, right, [key]))


def _fill_in(pair: _Pair, scope: _Scope) -> _Pair:
    """With exactly two sources, an unattributed side belongs to the one the other is not."""
    if len(scope.sources) != 2 or (pair.left is None) == (pair.right is None):
        return pair
    first, second = scope.sources
    if pair.left is None:
        return replace(pair, left=second if pair.right == first else first)
    return replace(pair, right=second if pair.left == first else first)


def _cross_joins(select: exp.Select, scope: _Scope, known: list[_Draft]) -> list[_Draft]:
    found = []
    for join in select.args.get("joins") or []:
        right = scope.by_node.get(id(join.this))
        if right is None or _is_keyed(join):
            continue
        if not any(right in (d.left, d.right) for d in known):
            found.append(_Draft("cross", scope.sources[0], right))
    return found


def _equalities(condition: exp.Expr, scope: _Scope) -> list[_Pair]:
    """``a = b`` conjuncts comparing columns (or one-column expressions) on both sides."""
    pairs = []
    for part in _split(condition, exp.And):
        if isinstance(part, exp.Or):
            pairs += [p for q in _common_conjuncts(part) if (p := _equality(q, scope))]
        elif pair := _equality(part, scope):
            pairs.append(pair)
    return pairs


def _common_conjuncts(node: exp.Or) -> list[exp.Expr]:
    """Conjuncts every OR branch repeats (TPC-H q19): Spark pulls them out as join keys.

    >>> tree = sqlglot.parse_one("(a = b AND x = 1) OR (a = b AND x = 2)")
    >>> [c.sql() for c in _common_conjuncts(tree)]
    ['a = b']
    """
    branches = [list(_split(branch, exp.And)) for branch in _split(node, exp.Or)]
    first, rest = branches[0], branches[1:]
    return [part for part in first if all(any(part == other for other in b) for b in rest)]


def _equality(part: exp.Expr, scope: _Scope) -> _Pair | None:
    if not isinstance(part, exp.EQ | exp.NullSafeEQ):
        return None
    left, right = _single_column(part.this), _single_column(part.expression)
    if left is None or right is None:
        return None
    return _Pair(
        _resolve(left, scope),
        _key_text(part.this, left),
        _resolve(right, scope),
        _key_text(part.expression, right),
    )


def _key_text(side: exp.Expr, column: exp.Column) -> str:
    return column.name if side is column else side.sql(dialect="spark")


def _broadcast_names(select: exp.Select) -> set[str]:
    """Tables named in ``/*+ BROADCAST(t) */``-style hints, lower case."""
    names: set[str] = set()
    hint = select.args.get("hint")
    if not isinstance(hint, exp.Hint):
        return names
    for item in hint.expressions:
        if str(item.name or item.this).upper() in ("BROADCAST", "BROADCASTJOIN", "MAPJOIN"):
            names.update(_short(t.sql()) for t in item.expressions)
    return names


def _join_fact(draft: _Draft, hinted: set[str], params: _Params) -> JoinFact:
    sides = [s for s in (draft.left, draft.right) if s is not None]
    broadcast = any(s.alias in hinted or _short(s.name) in hinted for s in sides)
    return JoinFact(
        kind=draft.kind,
        left=params.restore(draft.left.name) if draft.left else None,
        right=params.restore(draft.right.name) if draft.right else None,
        keys=[(params.restore(a), params.restore(b)) for a, b in draft.keys],
        broadcast=broadcast,
    )


def _add_merge_join(merge: exp.Merge, ctes: dict[str, frozenset[str]], facts: _Facts) -> None:
    """MERGE joins its source to its target: inner when only matched rows act, else left."""
    target = _source(merge.this, ctes, facts.params)
    using = merge.args.get("using")
    source = _source(using, ctes, facts.params) if isinstance(using, exp.Expr) else None
    scope = _Scope([s for s in (source, target) if s])
    on = merge.args.get("on")
    pairs = _equalities(on, scope) if isinstance(on, exp.Expr) else []
    pairs = [p.swapped() if p.left == target else p for p in pairs]
    whens = merge.args.get("whens")
    clauses = whens.expressions if isinstance(whens, exp.Whens) else []
    kind: JoinKind = "left" if any(not w.args.get("matched") for w in clauses) else "inner"
    draft = _Draft(kind, source, target, [(p.left_key, p.right_key) for p in pairs])
    facts.add(_join_fact(draft, set(), facts.params))
    if isinstance(on, exp.Expr):
        _add_condition(on, scope, facts)


def _group_width(group: exp.Group) -> int:
    """Grouping columns; a ROLLUP/CUBE/GROUPING SETS counts its distinct columns.

    >>> tree = sqlglot.parse_one("select 1 from t group by rollup(a, b), c", read="spark")
    >>> _group_width(tree.args["group"])
    3
    """
    width = 0
    for key in ("expressions", "rollup", "cube", "grouping_sets"):
        items = group.args.get(key)
        for item in items if isinstance(items, list) else []:
            if isinstance(item, exp.Rollup | exp.Cube | exp.GroupingSets):
                width += len({c.sql() for c in item.find_all(exp.Column)})
            else:
                width += 1
    return width


# --------------------------------------------------------------------------- SQL: filters

_COMPARISONS: dict[type[exp.Expr], str] = {
    exp.EQ: "=",
    exp.NEQ: "!=",
    exp.GT: ">",
    exp.GTE: ">=",
    exp.LT: "<",
    exp.LTE: "<=",
    exp.NullSafeEQ: "<=>",
}
_FLIPPED = {">": "<", ">=": "<=", "<": ">", "<=": ">="}
_LIKES: dict[type[exp.Expr], str] = {
    exp.Like: "like",
    exp.ILike: "ilike",
    exp.RegexpLike: "rlike",
}
_SUBQUERY_NODES = (exp.Subquery, exp.Select, exp.Exists)


@dataclass
class _Shape:
    """A predicate read as ``column-side operator values``."""

    side: exp.Expr
    operator: str
    values: list[exp.Expr]


def _split(node: exp.Expr, kind: type[exp.Expr]) -> Iterator[exp.Expr]:
    """Operands of nested AND (or OR) nodes in order, parentheses looked through.

    Iterative: generated SQL can chain thousands of ANDs.

    >>> [c.sql() for c in _split(sqlglot.parse_one("a = 1 AND (b = 2 AND c = 3)"), exp.And)]
    ['a = 1', 'b = 2', 'c = 3']
    """
    stack = [node]
    while stack:
        current = stack.pop()
        while isinstance(current, exp.Paren):
            current = current.this
        if isinstance(current, kind):
            stack += [current.expression, current.this]
        else:
            yield current


def _is_placeholder(node: exp.Expr) -> bool:
    return isinstance(node, exp.Column) and bool(_TOKEN_RE.fullmatch(node.name))


def _columns(node: exp.Expr) -> list[exp.Column]:
    return [c for c in node.find_all(exp.Column) if not _is_placeholder(c)]


def _single_column(side: exp.Expr) -> exp.Column | None:
    """The one column an expression reads, unless it aggregates or holds a subquery."""
    if side.find(exp.AggFunc, exp.Window, *_SUBQUERY_NODES):
        return None
    columns = _columns(side)
    return columns[0] if len(columns) == 1 else None


def _is_constant(node: exp.Expr) -> bool:
    return not _columns(node) and not node.find(*_SUBQUERY_NODES)


def _shape(pred: exp.Expr) -> _Shape | None:
    """Read ``pred`` as column-vs-literals, the column side first."""
    operator = _COMPARISONS.get(type(pred))
    if operator:
        left, right = pred.this, pred.expression
        if _single_column(left) and _is_constant(right):
            return _Shape(left, operator, [right])
        if _single_column(right) and _is_constant(left):
            return _Shape(right, _FLIPPED.get(operator, operator), [left])
        return None
    if _single_column(pred.this) is None:
        return None
    return _special_shape(pred)


def _special_shape(pred: exp.Expr) -> _Shape | None:
    negate = "not " if pred.args.get("negate") else ""
    if isinstance(pred, exp.Between):
        values = [pred.args["low"], pred.args["high"]]
        return (
            _Shape(pred.this, negate + "between", values)
            if all(map(_is_constant, values))
            else None
        )
    if isinstance(pred, exp.In):
        if pred.args.get("query"):
            return _Shape(pred.this, negate + "in", [exp.Var(this="(subquery)")])
        values = pred.expressions
        return _Shape(pred.this, negate + "in", values) if all(map(_is_constant, values)) else None
    if type(pred) in _LIKES and _is_constant(pred.expression):
        return _Shape(pred.this, negate + _LIKES[type(pred)], [pred.expression])
    if isinstance(pred, exp.Is):
        return _Shape(pred.this, "is", [pred.expression])
    return None


def _predicates(condition: exp.Expr) -> Iterator[tuple[exp.Expr, bool]]:
    """Every predicate of a condition with whether a NOT wraps it; subqueries left out."""
    for node in condition.walk(bfs=False, prune=lambda n: isinstance(n, _SUBQUERY_NODES)):
        if type(node) in _COMPARISONS or isinstance(
            node, exp.Between | exp.In | exp.Is | exp.Like | exp.ILike | exp.RegexpLike
        ):
            yield node, isinstance(node.parent, exp.Not)


def _add_condition(condition: exp.Expr, scope: _Scope, facts: _Facts) -> None:
    for pred, negated in _predicates(condition):
        shape = _shape(pred)
        if shape is not None:
            _add_filter(shape, negated, scope, facts)
    for group in _conjunct_groups(condition):
        ranges = _Ranges()
        for pred in group:
            shape = _shape(pred)
            column = _date_column(shape.side) if shape else None
            if shape and column:
                moments = [_fold_moment(v, column.name, facts.params) for v in shape.values]
                ranges.add(_table_of(column, scope), column.name, shape.operator, moments)
        for found in ranges.date_ranges():
            facts.add(found)


def _table_of(column: exp.Column, scope: _Scope) -> str | None:
    source = _resolve(column, scope)
    return source.name if source else None


def _add_filter(shape: _Shape, negated: bool, scope: _Scope, facts: _Facts) -> None:
    column = _single_column(shape.side)
    if column is None:
        return
    if shape.operator == "is":
        operator = ("is not " if negated else "is ") + shape.values[0].sql("spark").lower()
        values = []
    else:
        operator = ("not " if negated else "") + shape.operator
        values = [_render_sql_value(v, column.name, facts) for v in shape.values[:MAX_VALUES]]
    if len(shape.values) > MAX_VALUES:
        values.append(f"... {len(shape.values) - MAX_VALUES} more")
    side = column.name if shape.side is column else shape.side.sql(dialect="spark")
    facts.add(
        FilterFact(
            column=facts.params.restore(side),
            table=_table_of(column, scope),
            operator=operator,
            values=values,
            partition_like=_partition_like(column.name),
        )
    )


def _render_sql_value(node: exp.Expr, column: str, facts: _Facts) -> str:
    """A filter value as a reader wants it: literal text, ISO date, parameter as written."""
    if isinstance(node, exp.Literal):
        if not node.is_string:
            facts.literal("numbers", node.this)
        moment = _fold_moment(node, column, facts.params)
        if moment and moment.day and not moment.whole_year:
            facts.literal("dates", moment.render())
        return facts.params.restore(node.this)
    if _is_placeholder(node):
        return facts.params.display(node.name) or node.name
    moment = _fold_moment(node, column, facts.params)
    if moment is not None and moment.whole_year and moment.day:
        return str(moment.day.year)
    if moment is not None:
        if moment.day:
            facts.literal("dates", moment.render())
        return moment.render()
    return facts.params.restore(node.sql(dialect="spark"))


_PARTITION_LIKE = re.compile(
    r"^(dt|ds|day|date|month|year|hour|partition\w*)$"
    r"|_(dt|ds|day|month|year|hour|partition)$|date$|date_sk$|^p_?date",
    re.I,
)
_DATE_LIKE = re.compile(r"date|time|day|_ts$|^ts$|^dt$|^ds$|_dt$|_ds$|year|month", re.I)


def _partition_like(column: str) -> bool:
    """Names tables are usually partitioned by (dates, days, ``*_date``, ``partition``).

    >>> [_partition_like(c) for c in ["dt", "l_shipdate", "event_date", "ss_sold_date_sk", "id"]]
    [True, True, True, True, False]
    """
    return bool(_PARTITION_LIKE.search(column))


def _conjunct_groups(condition: exp.Expr) -> Iterator[list[exp.Expr]]:
    """Predicates that hold together (AND); every OR branch is a group of its own."""
    group = []
    for part in _split(condition, exp.And):
        if isinstance(part, exp.Or):
            for branch in _split(part, exp.Or):
                yield from _conjunct_groups(branch)
        else:
            group.append(part)
    yield group


def _date_column(side: exp.Expr) -> exp.Column | None:
    """The column itself, or a column cast to a date: the sides a date range can bound."""
    while isinstance(side, exp.Cast | exp.TryCast | exp.TsOrDsToDate | exp.Date):
        side = side.this
    return side if isinstance(side, exp.Column) and not _is_placeholder(side) else None


# --------------------------------------------------------------------------- dates


@dataclass(frozen=True)
class _Moment:
    """A point in time: a literal day, or a symbol (``current_date``, a parameter), plus offsets.

    ``whole_year`` marks ``d_year = 2000``-style bounds: as a lower bound the year's first day,
    as an upper bound its last.
    """

    day: date | None
    symbol: str = ""
    days: int = 0
    months: int = 0
    whole_year: bool = False
    partial_day: bool = False

    def shift(self, days: int = 0, months: int = 0) -> _Moment:
        return replace(self, days=self.days + days, months=self.months + months)

    def resolve(self) -> date | None:
        if self.day is None:
            return None
        try:
            return _add_months(self.day, self.months) + timedelta(days=self.days)
        except (OverflowError, ValueError):
            return None

    def render(self) -> str:
        """ISO day, or the symbol with its offset (``current_date - 7 days``).

        >>> _Moment(date(2024, 1, 31), months=1).render(), _Moment(None, "${ds}", -1).render()
        ('2024-02-29', '${ds} - 1 day')
        """
        resolved = self.resolve()
        if resolved is not None:
            return resolved.isoformat()
        parts = [self.symbol]
        for amount, unit in ((self.months, "month"), (self.days, "day")):
            if amount:
                plural = "s" if abs(amount) != 1 else ""
                parts.append(f"{'+' if amount > 0 else '-'} {abs(amount)} {unit}{plural}")
        return " ".join(parts)


def _add_months(day: date, months: int) -> date:
    year, month = divmod(day.month - 1 + months, 12)
    year += day.year
    last = calendar.monthrange(year, month + 1)[1]
    return date(year, month + 1, min(day.day, last))


_DATE_TEXT = re.compile(r"^(\d{4}-\d{2}-\d{2})(?:[ T](\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?)?\s*$")
_YEAR_COLUMN = re.compile(r"(^|_)year$", re.I)


def _literal_moment(text: str, is_string: bool, column: str, params: _Params) -> _Moment | None:
    """A literal as a point in time, when it is one for this column.

    >>> p = _Params()
    >>> _literal_moment("2024-03-01 10:00", True, "ts", p).partial_day
    True
    >>> _literal_moment("2000", False, "d_year", p).whole_year
    True
    """
    match = _DATE_TEXT.match(text) if is_string else None
    if match:
        partial = any(g and int(g) for g in match.groups()[1:])
        day = _iso_day(match[1])
        return _Moment(day, partial_day=partial) if day else None
    if is_string and params.display(text):
        return _Moment(None, params.display(text) or text)
    if _YEAR_COLUMN.search(column) and text.isdigit() and 1900 <= int(text) <= 2100:
        return _Moment(date(int(text), 1, 1), whole_year=True)
    if is_string and re.fullmatch(r"\d{8}", text) and _partition_like(column):
        day = _iso_day(f"{text[:4]}-{text[4:6]}-{text[6:]}")
        return _Moment(day) if day else None
    return None


def _iso_day(text: str) -> date | None:
    try:
        return date.fromisoformat(text)
    except ValueError:
        return None


_DATE_WRAPPERS = (
    exp.Cast,
    exp.TryCast,
    exp.TsOrDsToDate,
    exp.TsOrDsToTimestamp,
    exp.StrToDate,
    exp.StrToTime,
    exp.TimeStrToTime,
    exp.TimeStrToDate,
    exp.DateStrToDate,
    exp.Date,
    exp.Paren,
)
_NOW = (exp.CurrentDate, exp.CurrentTimestamp, exp.CurrentDatetime)


def _fold_moment(node: exp.Expr, column: str, params: _Params) -> _Moment | None:
    """Evaluate a constant SQL date expression (casts, ``± INTERVAL``, ``date_add``...).

    >>> tree = sqlglot.parse_one("select date '1998-12-01' - interval '90' day", read="spark")
    >>> _fold_moment(tree.expressions[0], "l_shipdate", _Params()).render()
    '1998-09-02'
    """
    while isinstance(node, _DATE_WRAPPERS):
        node = node.this
    if isinstance(node, exp.Literal):
        return _literal_moment(str(node.this), node.is_string, column, params)
    if _is_placeholder(node):
        return _Moment(None, params.display(node.name) or node.name)
    if isinstance(node, _NOW):
        return _Moment(None, "current_date")
    if _YEAR_COLUMN.search(column) and (year := _fold_int(node)) is not None:
        return _literal_moment(str(year), False, column, params)
    if isinstance(node, exp.Add | exp.Sub):
        return _fold_arithmetic(node, column, params)
    if isinstance(node, exp.DateAdd | exp.DateSub | exp.TsOrDsAdd | exp.AddMonths):
        return _fold_date_function(node, column, params)
    return None


def _fold_arithmetic(node: exp.Add | exp.Sub, column: str, params: _Params) -> _Moment | None:
    base, delta = node.this, node.expression
    if isinstance(node, exp.Add) and _interval(base) is not None:
        base, delta = delta, base
    moment = _fold_moment(base, column, params)
    shift = _interval(delta)
    if shift is None and (days := _fold_int(delta)) is not None:
        shift = (days, 0)
    if moment is None or shift is None or moment.whole_year:
        return None
    sign = 1 if isinstance(node, exp.Add) else -1
    return moment.shift(sign * shift[0], sign * shift[1])


def _fold_date_function(node: exp.Expr, column: str, params: _Params) -> _Moment | None:
    moment = _fold_moment(node.this, column, params)
    amount_node = node.args.get("expression")
    amount = _fold_int(amount_node) if isinstance(amount_node, exp.Expr) else None
    if moment is None or amount is None:
        return None
    if isinstance(node, exp.AddMonths):
        return moment.shift(months=amount)
    unit = _unit_shift(str(node.args.get("unit") or "DAY"), amount)
    if unit is None:
        return None
    sign = -1 if isinstance(node, exp.DateSub) else 1
    return moment.shift(sign * unit[0], sign * unit[1])


_UNITS = {"day": (1, 0), "week": (7, 0), "month": (0, 1), "quarter": (0, 3), "year": (0, 12)}


def _unit_shift(unit: str, amount: int) -> tuple[int, int] | None:
    """``(days, months)`` for ``amount`` units; None for sub-day units.

    >>> _unit_shift("DAYS", 3), _unit_shift("year", 2), _unit_shift("HOUR", 1)
    ((3, 0), (0, 24), None)
    """
    step = _UNITS.get(unit.lower().rstrip("s"))
    return (step[0] * amount, step[1] * amount) if step else None


def _interval(node: exp.Expr) -> tuple[int, int] | None:
    while isinstance(node, exp.Paren):
        node = node.this
    if not isinstance(node, exp.Interval):
        return None
    unit = node.args.get("unit")
    amount = node.this
    if isinstance(amount, exp.Literal) and unit is None:
        number, _, text = str(amount.this).strip().partition(" ")
        return _unit_shift(text, int(number)) if number.lstrip("-").isdigit() else None
    value = _fold_int(amount) if isinstance(amount, exp.Expr) else None
    return _unit_shift(str(unit.name if unit else "day"), value) if value is not None else None


def _fold_int(node: exp.Expr) -> int | None:
    """Integer constant arithmetic (``2001 + 1``, ``7 * -1``, ``'90'``).

    >>> _fold_int(sqlglot.parse_one("(2001 + 1) * -1"))
    -2002
    """
    if isinstance(node, exp.Paren):
        return _fold_int(node.this)
    if isinstance(node, exp.Literal):
        text = str(node.this).strip()
        return int(text) if text.lstrip("-").isdigit() else None
    if isinstance(node, exp.Neg):
        inner = _fold_int(node.this)
        return -inner if inner is not None else None
    ops: dict[type[exp.Expr], Callable[[int, int], int]] = {
        exp.Add: lambda a, b: a + b,
        exp.Sub: lambda a, b: a - b,
        exp.Mul: lambda a, b: a * b,
    }
    op = ops.get(type(node))
    if op is None:
        return None
    left, right = _fold_int(node.this), _fold_int(node.expression)
    return op(left, right) if left is not None and right is not None else None


_Bound = tuple[_Moment, bool]


class _Ranges:
    """Lower and upper bounds per column, collected over predicates that hold together."""

    def __init__(self) -> None:
        self.bounds: dict[tuple[str | None, str], list[_Bound | None]] = {}

    def add(
        self, table: str | None, column: str, operator: str, moments: list[_Moment | None]
    ) -> None:
        usable = [m for m in moments if m is not None and _usable(m, column)]
        if not usable or len(usable) != len(moments):
            return
        lower, upper = _bounds_for(operator, usable)
        current = self.bounds.setdefault((table, column), [None, None])
        current[0] = current[0] or lower
        current[1] = current[1] or upper

    def date_ranges(self) -> list[DateRange]:
        found = []
        for (table, column), (lower, upper) in self.bounds.items():
            if lower is None and upper is None:
                continue
            start = _inclusive(lower, lower=True) if lower else None
            end = _inclusive(upper, lower=False) if upper else None
            found.append(
                DateRange(
                    column=column,
                    table=table,
                    start=start.render() if start else None,
                    end=end.render() if end else None,
                    days=_span_days(start, end),
                )
            )
        return found


def _usable(moment: _Moment, column: str) -> bool:
    """Literal days always bound a range; symbols only on columns named like dates."""
    return moment.day is not None or moment.symbol == "current_date" or _date_named(column)


def _date_named(column: str) -> bool:
    return bool(_DATE_LIKE.search(column))


def _bounds_for(operator: str, moments: list[_Moment]) -> tuple[_Bound | None, _Bound | None]:
    """Lower and upper bound (moment, inclusive) a comparison sets.

    >>> low, high = _bounds_for("<", [_Moment(date(2024, 2, 1))])
    >>> low, high[1]
    (None, False)
    """
    first = moments[0]
    if operator in ("=", "<=>"):
        return (first, True), (first, True)
    if operator in (">", ">="):
        return (first, operator == ">="), None
    if operator in ("<", "<="):
        return None, (first, operator == "<=")
    if operator == "between" and len(moments) == 2:
        return (moments[0], True), (moments[1], True)
    if operator == "in" and all(m.day for m in moments):
        ordered = sorted(moments, key=lambda m: m.resolve() or date.min)
        return (ordered[0], True), (ordered[-1], True)
    return None, None


def _inclusive(bound: _Bound, *, lower: bool) -> _Moment:
    """The first (or last) day a bound lets through."""
    moment, inclusive = bound
    if moment.whole_year and moment.day:
        year = moment.day.year + (0 if inclusive else 1 if lower else -1)
        return _Moment(date(year, 1, 1) if lower else date(year, 12, 31))
    if inclusive or moment.partial_day:
        return moment
    return moment.shift(1 if lower else -1)


def _span_days(start: _Moment | None, end: _Moment | None) -> int | None:
    """Whole days from ``start`` to ``end`` inclusive; months count 30.44 days when symbolic.

    >>> _span_days(_Moment(date(2024, 1, 1)), _Moment(date(2024, 1, 31)))
    31
    >>> _span_days(_Moment(None, "current_date", -7), _Moment(None, "current_date", -1))
    7
    """
    if start is None or end is None:
        return None
    first, last = start.resolve(), end.resolve()
    if first is not None and last is not None:
        return max((last - first).days + 1, 0)
    if start.day is None and end.day is None and start.symbol == end.symbol:
        months = end.months - start.months
        return max(end.days - start.days + round(months * 30.44) + 1, 0)
    return None


# --------------------------------------------------------------------------- Python

_AGGREGATES = {
    "sum": "sum",
    "avg": "avg",
    "mean": "avg",
    "count": "count",
    "countDistinct": "count_distinct",
    "count_distinct": "count_distinct",
    "approx_count_distinct": "approx_count_distinct",
    "approxCountDistinct": "approx_count_distinct",
    "sumDistinct": "sum_distinct",
    "sum_distinct": "sum_distinct",
    "min": "min",
    "max": "max",
    "first": "first",
    "last": "last",
    "collect_list": "collect_list",
    "collect_set": "collect_set",
    "stddev": "stddev",
    "stddev_samp": "stddev_samp",
    "stddev_pop": "stddev_pop",
    "variance": "variance",
    "var_samp": "var_samp",
    "var_pop": "var_pop",
    "percentile_approx": "percentile_approx",
    "percentile": "percentile",
    "median": "median",
    "mode": "mode",
    "corr": "corr",
    "covar_pop": "covar_pop",
    "covar_samp": "covar_samp",
    "kurtosis": "kurtosis",
    "skewness": "skewness",
    "max_by": "max_by",
    "min_by": "min_by",
    "any_value": "any_value",
    "count_if": "count_if",
    "bool_and": "bool_and",
    "bool_or": "bool_or",
    "product": "product",
    "array_agg": "collect_list",
}
_RANKING = frozenset(
    {"row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile", "lag", "lead"}
    | {"nth_value"}
)
_GROUPERS = frozenset({"groupBy", "groupby", "rollup", "cube", "pivot"})
_READ_FORMATS = frozenset(
    {"table", "parquet", "csv", "json", "orc", "text", "avro", "load", "xml", "delta", "jdbc"}
)
_WRITE_FORMATS = frozenset({"parquet", "csv", "json", "orc", "text", "avro", "save", "xml"})
_WRITE_TABLES = frozenset({"saveAsTable", "insertInto", "toTable", "writeTo"})
_TEMP_VIEWS = frozenset(
    {"createOrReplaceTempView", "createTempView", "createGlobalTempView"}
    | {"createOrReplaceGlobalTempView", "registerTempTable"}
)
_PANDAS_MAPS = frozenset({"mapInPandas", "applyInPandas", "mapInArrow", "applyInArrow"})
_RDD_OPS = frozenset(
    {"map", "flatMap", "mapPartitions", "foreach", "foreachPartition", "reduceByKey"}
    | {"groupByKey", "mapValues", "filter", "aggregateByKey", "combineByKey"}
)
_UDF_MAKERS = frozenset({"udf", "pandas_udf", "vectorized_udf", "udtf"})
_ML_ESTIMATORS = frozenset(
    {
        "LogisticRegression",
        "LinearRegression",
        "GeneralizedLinearRegression",
        "IsotonicRegression",
        "AFTSurvivalRegression",
        "FMClassifier",
        "FMRegressor",
        "DecisionTreeClassifier",
        "DecisionTreeRegressor",
        "RandomForestClassifier",
        "RandomForestRegressor",
        "GBTClassifier",
        "GBTRegressor",
        "NaiveBayes",
        "LinearSVC",
        "MultilayerPerceptronClassifier",
        "OneVsRest",
        "KMeans",
        "BisectingKMeans",
        "GaussianMixture",
        "LDA",
        "PowerIterationClustering",
        "ALS",
        "FPGrowth",
        "PrefixSpan",
        "CrossValidator",
        "TrainValidationSplit",
        "Pipeline",
        "StringIndexer",
        "OneHotEncoder",
        "StandardScaler",
        "MinMaxScaler",
        "MaxAbsScaler",
        "RobustScaler",
        "Imputer",
        "PCA",
        "CountVectorizer",
        "IDF",
        "Word2Vec",
        "ChiSqSelector",
        "UnivariateFeatureSelector",
        "VarianceThresholdSelector",
        "QuantileDiscretizer",
        "VectorIndexer",
        "BucketedRandomProjectionLSH",
        "MinHashLSH",
        "SparkXGBClassifier",
        "SparkXGBRegressor",
        "LightGBMClassifier",
        "LightGBMRegressor",
    }
)
_HOW: dict[str, JoinKind] = {
    "inner": "inner",
    "cross": "cross",
    "outer": "full",
    "full": "full",
    "fullouter": "full",
    "full_outer": "full",
    "left": "left",
    "leftouter": "left",
    "left_outer": "left",
    "right": "right",
    "rightouter": "right",
    "right_outer": "right",
    "semi": "left_semi",
    "leftsemi": "left_semi",
    "left_semi": "left_semi",
    "anti": "left_anti",
    "leftanti": "left_anti",
    "left_anti": "left_anti",
}
_PY_OPERATORS: dict[type[ast.cmpop], str] = {
    ast.Eq: "=",
    ast.NotEq: "!=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Lt: "<",
    ast.LtE: "<=",
}


@dataclass
class _Py:
    """What a PySpark module has bound so far, read in source order."""

    facts: _Facts
    parents: dict[int, ast.AST]
    modules: set[str] = field(default_factory=lambda: {"F"})
    functions: dict[str, str] = field(default_factory=dict)
    star_import: bool = False
    strings: dict[str, str] = field(default_factory=dict)
    frames: dict[str, str] = field(default_factory=dict)
    estimators: dict[str, str] = field(default_factory=dict)
    deltas: set[str] = field(default_factory=set)
    sql_tables: dict[int, str] = field(default_factory=dict)
    ranges: dict[int, _Ranges] = field(default_factory=dict)
    window_spec: bool = False


def _profile_python(text: str, facts: _Facts) -> None:
    try:
        tree = ast.parse(text)
    except SyntaxError as err:
        where = f"line {err.lineno}, col {err.offset}"
        raise ConfigError(f"Python could not be parsed: {where}: {err.msg}") from err
    except (ValueError, RecursionError, MemoryError) as err:
        raise ConfigError(f"Python could not be parsed: {err}") from err
    ctx = _Py(facts, {id(c): p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)})
    _read_imports(tree, ctx)
    for node in _post_order(tree):
        try:
            _py_visit(node, ctx)
        except RecursionError:
            line = getattr(node, "lineno", "?")
            facts.warnings.append(f"line {line}: expression nested too deeply to profile")
    for ranges in ctx.ranges.values():
        for found in ranges.date_ranges():
            facts.add(found)
    if ctx.window_spec and not facts.windows:
        facts.windows.add("window")
    facts.statements = _simple_statements(tree)


def _post_order(root: ast.AST) -> list[ast.AST]:
    """Children before parents, siblings in source order; iterative so deep chains are fine."""
    stack: list[tuple[ast.AST, bool]] = [(root, False)]
    ordered = []
    while stack:
        node, expanded = stack.pop()
        if expanded:
            ordered.append(node)
            continue
        stack.append((node, True))
        stack.extend((c, False) for c in reversed(list(ast.iter_child_nodes(node))))
    return ordered


def _simple_statements(tree: ast.Module) -> int:
    """Python statements that do something (not imports, defs, docstrings or ``pass``)."""
    skipped = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    compound = (ast.If, ast.For, ast.While, ast.With, ast.Try, ast.AsyncFor, ast.AsyncWith)
    count = 0
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt) or isinstance(node, skipped + compound + (ast.Pass,)):
            continue
        docstring = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        count += not docstring
    return count


def _read_imports(tree: ast.Module, ctx: _Py) -> None:
    """Which names mean ``pyspark.sql.functions`` (``F``, ``sf``...) or one of its functions."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "pyspark.sql.functions" and alias.asname:
                    ctx.modules.add(alias.asname)
        elif isinstance(node, ast.ImportFrom) and node.module == "pyspark.sql":
            for alias in node.names:
                if alias.name == "functions":
                    ctx.modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.ImportFrom) and node.module == "pyspark.sql.functions":
            for alias in node.names:
                ctx.star_import |= alias.name == "*"
                ctx.functions[alias.asname or alias.name] = alias.name


def _py_visit(node: ast.AST, ctx: _Py) -> None:
    if isinstance(node, ast.Call):
        _py_call(node, ctx)
    elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        _py_decorators(node, ctx)
    elif isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
        _py_bind(node, node.value, ctx)
    elif isinstance(node, ast.Attribute):
        _py_argv(node, ctx)


def _call_name(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _receiver(call: ast.Call) -> ast.expr | None:
    return call.func.value if isinstance(call.func, ast.Attribute) else None


def _spark_function(call: ast.Call, ctx: _Py) -> str | None:
    """The ``pyspark.sql.functions`` function a call invokes (``F.sum``, imported ``col``)."""
    func = call.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return func.attr if func.value.id in ctx.modules else None
    if isinstance(func, ast.Name):
        if func.id in ctx.functions:
            return ctx.functions[func.id]
        known = func.id in _AGGREGATES or func.id in _RANKING or func.id in ("col", "lit")
        return func.id if ctx.star_import and known else None
    return None


def _chain_names(node: ast.AST | None) -> list[str]:
    """Attribute and call names down a method chain, outermost first.

    >>> _chain_names(ast.parse("spark.read.format('x').load('p')").body[0].value)
    ['load', 'format', 'read', 'spark']
    """
    names = []
    while node is not None:
        if isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, ast.Attribute):
            names.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Subscript):
            node = node.value
        else:
            names.append(node.id if isinstance(node, ast.Name) else "")
            node = None
    return names


def _io_direction(call: ast.Call) -> Literal["read", "write"] | None:
    """Whether a ``.parquet(...)``-style call reads or writes: the nearest read/write wins."""
    for name in _chain_names(call)[1:]:
        if name in ("read", "readStream"):
            return "read"
        if name in ("write", "writeStream", "writeTo"):
            return "write"
    return None


def _py_call(call: ast.Call, ctx: _Py) -> None:
    name = _call_name(call)
    handler = _PY_HANDLERS.get(name)
    if handler is not None:
        handler(call, ctx)
    if name in _ML_ESTIMATORS:
        _py_estimator(call, name, ctx)
    elif name.startswith("set") and name[3:4].isupper():
        _py_setter(call, ctx)
    function = _spark_function(call, ctx)
    if function is not None:
        _py_spark_function(call, function, ctx)
    _py_parameter(call, name, ctx)


def _py_spark_function(call: ast.Call, function: str, ctx: _Py) -> None:
    parent = ctx.parents.get(id(call))
    windowed = isinstance(parent, ast.Attribute) and parent.attr == "over"
    if function in _RANKING or (windowed and function in _AGGREGATES):
        ctx.facts.windows.add(_AGGREGATES.get(function, function))
    elif function in _AGGREGATES:
        ctx.facts.aggregations.add(_AGGREGATES[function])
    elif function in _UDF_MAKERS and not _is_decorator(call, ctx):
        _py_udf_call(call, function, ctx)
    elif function == "expr" and call.args:
        _py_sql_expression(call.args[0], ctx)


def _is_decorator(call: ast.Call, ctx: _Py) -> bool:
    parent = ctx.parents.get(id(call))
    return (
        isinstance(parent, ast.FunctionDef | ast.AsyncFunctionDef) and call in parent.decorator_list
    )


def _py_udf_call(call: ast.Call, maker: str, ctx: _Py) -> None:
    """``udf(f, T)`` / ``pandas_udf(f, T)``: named after the function, or the variable bound."""
    function = call.args[0] if call.args else None
    if function is None or isinstance(function, ast.Constant):
        return
    name = _callable_name(function)
    parent = ctx.parents.get(id(call))
    if (
        name == "lambda"
        and isinstance(parent, ast.Assign)
        and isinstance(parent.targets[0], ast.Name)
    ):
        name = parent.targets[0].id
    ctx.facts.udfs.add(f"{maker}:{name}")


def _callable_name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return "lambda" if isinstance(node, ast.Lambda) else ast.unparse(node)


def _py_decorators(function: ast.FunctionDef | ast.AsyncFunctionDef, ctx: _Py) -> None:
    for decorator in function.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        name = ctx.functions.get(name, name)
        if name in _UDF_MAKERS:
            ctx.facts.udfs.add(f"{name}:{function.name}")


def _py_bind(node: ast.Assign | ast.AnnAssign, value: ast.expr, ctx: _Py) -> None:
    """Remember what a variable holds: SQL text, a DataFrame's source, an estimator."""
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    text = _py_text(value, ctx)
    source = _df_source(value, ctx)
    estimator = _call_name(value) if isinstance(value, ast.Call) else ""
    for target in targets:
        if not isinstance(target, ast.Name):
            continue
        for store, item in ((ctx.strings, text), (ctx.frames, source)):
            if item is None:
                store.pop(target.id, None)
            else:
                store[target.id] = item
        if estimator in _ML_ESTIMATORS:
            ctx.estimators[target.id] = estimator
        if {"forName", "forPath"} & set(_chain_names(value)):
            ctx.deltas.add(target.id)


def _py_text(node: ast.AST, ctx: _Py) -> str | None:
    """A string expression's text, f-string holes and ``{}``/``%s`` slots as parameter tokens.

    Holes naming a variable bound to a plain string are filled in (``f"FROM {table}"``).
    """
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(_py_hole(part, ctx) for part in node.values)
    if isinstance(node, ast.Name):
        return ctx.strings.get(node.id)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _py_text(node.left, ctx), _py_text(node.right, ctx)
        return left + right if left is not None and right is not None else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        template = _py_text(node.left, ctx)
        slot = re.compile(r"%(?:\((\w+)\))?[sdifr]")
        return slot.sub(lambda m: _slot(m[1] or "%s", ctx), template) if template else None
    if isinstance(node, ast.Call):
        return _py_text_call(node, ctx)
    return None


def _py_text_call(call: ast.Call, ctx: _Py) -> str | None:
    name = _call_name(call)
    receiver = _receiver(call)
    if name == "format" and receiver is not None:
        template = _py_text(receiver, ctx)
        values = {k.arg: _py_text(k.value, ctx) for k in call.keywords if k.arg}

        def fill(match: re.Match[str]) -> str:
            return values.get(match[1]) or _slot(match[1] or "{}", ctx)

        return re.sub(r"\{(\w*)[^{}]*\}", fill, template) if template is not None else None
    if name in ("strip", "lstrip", "rstrip", "lower", "upper") and receiver is not None:
        return _py_text(receiver, ctx)
    if name == "dedent" and call.args:
        return _py_text(call.args[0], ctx)
    return None


def _slot(name: str, ctx: _Py) -> str:
    display = name if name.startswith(("{", "%")) else "{" + name + "}"
    return ctx.facts.params.token(display, parameter=False)


def _py_hole(part: ast.expr, ctx: _Py) -> str:
    if isinstance(part, ast.Constant):
        return str(part.value)
    if isinstance(part, ast.FormattedValue):
        value = part.value
        if isinstance(value, ast.Name) and value.id in ctx.strings:
            return ctx.strings[value.id]
        return _slot(ast.unparse(value), ctx)
    return ""


def _display(text: str, ctx: _Py) -> str:
    return ctx.facts.params.restore(text)


def _py_string_arg(call: ast.Call, index: int, keywords: tuple[str, ...], ctx: _Py) -> str | None:
    """Argument ``index`` (or a keyword) as text, variables and f-strings resolved."""
    node: ast.expr | None = call.args[index] if len(call.args) > index else None
    for keyword in call.keywords:
        if keyword.arg in keywords:
            node = keyword.value
    if node is None:
        return None
    text = _py_text(node, ctx)
    if text is None and isinstance(node, ast.Name):
        return "{" + node.id + "}"
    return _display(text, ctx) if text is not None else None


# --------------------------------------------------------------------------- Python: sources


def _df_source(node: ast.AST | None, ctx: _Py) -> str | None:
    """The table or path a DataFrame expression starts from, following variables and chains."""
    while node is not None:
        if isinstance(node, ast.Name):
            return ctx.frames.get(node.id)
        if isinstance(node, ast.Attribute | ast.Subscript):
            node = node.value
            continue
        if not isinstance(node, ast.Call):
            return None
        found = _call_source(node, ctx)
        if found is not None:
            return found
        if _spark_function(node, ctx) == "broadcast" and node.args:
            node = node.args[0]
        else:
            node = _receiver(node)
    return None


def _call_source(call: ast.Call, ctx: _Py) -> str | None:
    name = _call_name(call)
    if id(call) in ctx.sql_tables:
        return ctx.sql_tables[id(call)]
    if name in ("forName", "forPath"):
        return _py_string_arg(call, 1, ("tableOrViewName", "path"), ctx)
    direction = _io_direction(call)
    readable = direction == "read" or (name == "table" and direction is None and _on_session(call))
    return _io_target(call, ctx) if name in _READ_FORMATS and readable else None


def _io_target(call: ast.Call, ctx: _Py) -> str | None:
    if _call_name(call) == "jdbc":
        return _py_string_arg(call, 1, ("table",), ctx)
    found = _py_string_arg(call, 0, ("path", "tableName", "name", "table"), ctx)
    return found or _option(call, ("path", "dbtable"), ctx)


def _option(call: ast.Call, keys: tuple[str, ...], ctx: _Py) -> str | None:
    """A ``.option("path", ...)`` further down the chain, for ``load()`` without arguments."""
    node: ast.AST | None = _receiver(call)
    while isinstance(node, ast.Call | ast.Attribute):
        if isinstance(node, ast.Call) and _call_name(node) == "option" and len(node.args) == 2:
            key = _py_text(node.args[0], ctx)
            if key and key.lower() in keys:
                return _py_string_arg(node, 1, (), ctx)
        node = node.func if isinstance(node, ast.Call) else node.value
    return None


def _py_read_write(call: ast.Call, ctx: _Py) -> None:
    name = _call_name(call)
    direction = _io_direction(call)
    if name == "table" and direction is None and _on_session(call):
        direction = "read"
    target = _io_target(call, ctx) if direction else None
    if target is None:
        return
    if direction == "read" and (name in _READ_FORMATS):
        ctx.facts.read[target] = None
    elif direction == "write" and name in _WRITE_FORMATS:
        ctx.facts.written[target] = None


def _on_session(call: ast.Call) -> bool:
    """Called on something named like a Spark session (``spark``, ``self.session``...)."""
    names = [n.lower() for n in _chain_names(call)[1:]]
    return any(k in n for n in names for k in ("spark", "session", "context", "ctx"))


def _py_write_table(call: ast.Call, ctx: _Py) -> None:
    target = _py_string_arg(call, 0, ("name", "tableName", "table"), ctx)
    if target is not None:
        ctx.facts.written[target] = None


def _py_delta(call: ast.Call, ctx: _Py) -> None:
    target = _call_source(call, ctx)
    if target is not None and "DeltaTable" in _chain_names(call):
        ctx.facts.read[target] = None


def _py_delta_write(call: ast.Call, ctx: _Py) -> None:
    """``DeltaTable.forName(...).merge/update/delete`` writes the Delta table."""
    receiver = _receiver(call)
    names = _chain_names(receiver)
    is_delta = bool({"forName", "forPath"} & set(names)) or names[-1:] in ([d] for d in ctx.deltas)
    target = _df_source(receiver, ctx)
    if is_delta and target is not None:
        ctx.facts.written[target] = None


def _py_temp_view(call: ast.Call, ctx: _Py) -> None:
    name = _py_string_arg(call, 0, ("name", "viewName"), ctx)
    if name is not None:
        ctx.facts.views.add(name.lower())


def _py_sql(call: ast.Call, ctx: _Py) -> None:
    """``spark.sql(...)``: the text is profiled as SQL, its facts merged into the script's."""
    if not call.args:
        return
    text = _py_text(call.args[0], ctx)
    if text is None:
        ctx.facts.warnings.append(f"line {call.lineno}: SQL text is not a literal; not profiled")
        return
    before = list(ctx.facts.read)
    for error in _profile_sql_text(text, ctx.facts):
        ctx.facts.warnings.append(f"line {call.lineno}: SQL skipped: {error}")
    new = [t for t in ctx.facts.read if t not in before]
    if new:
        ctx.sql_tables[id(call)] = new[0]


def _py_sql_expression(node: ast.expr, ctx: _Py) -> None:
    """``F.expr("...")`` / ``selectExpr("...")``: functions used inside the SQL snippet."""
    text = _py_text(node, ctx)
    if text is None:
        return
    try:
        tree: exp.Expr = exp.maybe_parse(
            _substitute_parameters(text, ctx.facts.params), dialect="spark"
        )
    except (ParseError, TokenError):
        ctx.facts.warnings.append(f"line {node.lineno}: SQL expression could not be parsed")
        return
    _add_functions(tree, ctx.facts)


def _py_select_expr(call: ast.Call, ctx: _Py) -> None:
    for arg in call.args:
        _py_sql_expression(arg, ctx)


# --------------------------------------------------------------------------- Python: joins


def _py_join(call: ast.Call, ctx: _Py) -> None:
    other = call.args[0] if call.args else _keyword(call, "other")
    receiver = _receiver(call)
    if other is None or receiver is None or _is_text_join(receiver, ctx):
        return
    left, right = _df_source(receiver, ctx), _df_source(other, ctx)
    on = call.args[1] if len(call.args) > 1 else _keyword(call, "on")
    how = call.args[2] if len(call.args) > 2 else _keyword(call, "how")
    if left is None and right is None and on is None and how is None:
        return
    how_text = _py_text(how, ctx) if how is not None else None
    default: JoinKind = "inner" if on is not None else "cross"
    kind = _HOW.get((how_text or "").lower().replace(" ", ""), default)
    fact = JoinFact(
        kind=kind,
        left=left,
        right=right,
        keys=_py_join_keys(on, ctx),
        broadcast=_broadcast_wrapped(other, ctx),
    )
    ctx.facts.add(fact)


def _is_text_join(receiver: ast.expr, ctx: _Py) -> bool:
    """``",".join(parts)``, ``sep.join(...)``, ``os.path.join(...)``: not DataFrames."""
    if isinstance(receiver, ast.Constant | ast.JoinedStr):
        return True
    if isinstance(receiver, ast.Name) and receiver.id in ctx.strings:
        return True
    return _chain_names(receiver)[-1:] in (["os"], ["path"], ["posixpath"], ["ntpath"])


def _py_cross_join(call: ast.Call, ctx: _Py) -> None:
    other = call.args[0] if call.args else None
    left, right = _df_source(_receiver(call), ctx), _df_source(other, ctx)
    broadcast = other is not None and _broadcast_wrapped(other, ctx)
    ctx.facts.add(JoinFact(kind="cross", left=left, right=right, keys=[], broadcast=broadcast))


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _broadcast_wrapped(node: ast.expr, ctx: _Py) -> bool:
    """``broadcast(df)`` or ``df.hint("broadcast")``."""
    for part in ast.walk(node):
        if not isinstance(part, ast.Call):
            continue
        if _spark_function(part, ctx) == "broadcast":
            return True
        if _call_name(part) == "hint" and part.args:
            hint = _py_text(part.args[0], ctx) or ""
            if hint.lower() in ("broadcast", "broadcastjoin", "mapjoin"):
                return True
    return False


def _py_join_keys(on: ast.expr | None, ctx: _Py) -> list[tuple[str, str]]:
    """Keys from ``on="k"``, ``on=["a", "b"]``, ``a.k == b.k`` and ``(..) & (..)``.

    >>> _py_join_keys(ast.parse("(a.id == b.cid) & (F.col('x') == F.col('y'))").body[0].value,
    ...               _Py(_Facts(), {}))
    [('id', 'cid'), ('x', 'y')]
    """
    if on is None:
        return []
    if isinstance(on, ast.List | ast.Tuple):
        return [key for item in on.elts for key in _py_join_keys(item, ctx)]
    if isinstance(on, ast.BinOp) and isinstance(on.op, ast.BitAnd):
        return _py_join_keys(on.left, ctx) + _py_join_keys(on.right, ctx)
    if isinstance(on, ast.Compare) and len(on.ops) == 1 and isinstance(on.ops[0], ast.Eq):
        left, right = _py_column(on.left, ctx), _py_column(on.comparators[0], ctx)
        return [(left, right)] if left and right else []
    text = _py_text(on, ctx)
    return [(_display(text, ctx), _display(text, ctx))] if text is not None else []


def _py_column(node: ast.expr, ctx: _Py) -> str | None:
    """``col("x")``, ``F.col("x")``, ``df.x`` or ``df["x"]`` → ``x``."""
    if isinstance(node, ast.Call) and _spark_function(node, ctx) in ("col", "column"):
        return _py_string_arg(node, 0, ("col",), ctx)
    if isinstance(node, ast.Call) and _call_name(node) in ("cast", "alias", "astype"):
        receiver = _receiver(node)
        return _py_column(receiver, ctx) if receiver is not None else None
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return node.attr if node.value.id not in ctx.modules else None
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        return str(node.slice.value) if isinstance(node.slice.value, str) else None
    return None


# --------------------------------------------------------------------------- Python: filters


def _py_filter(call: ast.Call, ctx: _Py) -> None:
    receiver = _receiver(call)
    if not call.args or receiver is None:
        return
    condition = call.args[0]
    if isinstance(condition, ast.Lambda):
        if "rdd" in _chain_names(receiver):
            ctx.facts.udfs.add("rdd.filter")
        return
    table = _df_source(receiver, ctx)
    text = _py_text(condition, ctx)
    if text is not None:
        _py_sql_condition(text, table, call.lineno, ctx)
        return
    ranges = ctx.ranges.setdefault(id(_statement_of(call, ctx)), _Ranges())
    for column, operator, values in _py_shapes(condition, ctx, negated=False):
        _py_add_filter(table, column, operator, values, ranges, ctx)


def _statement_of(node: ast.AST, ctx: _Py) -> ast.AST:
    """The statement a call sits in: filters of one statement bound one range together."""
    current: ast.AST = node
    while not isinstance(current, ast.stmt) and id(current) in ctx.parents:
        current = ctx.parents[id(current)]
    return current


def _py_sql_condition(text: str, table: str | None, line: int, ctx: _Py) -> None:
    """A filter written as a SQL string (``df.where("dt >= '2024-01-01'")``)."""
    sql = _substitute_parameters(text, ctx.facts.params)
    try:
        condition = exp.condition(sql, dialect="spark")
    except (ParseError, TokenError):
        ctx.facts.warnings.append(f"line {line}: filter text could not be parsed as SQL")
        return
    source = _Source("", table, None, True) if table else None
    _add_condition(condition, _Scope([source] if source else []), ctx.facts)


def _py_shapes(
    node: ast.expr, ctx: _Py, *, negated: bool
) -> Iterator[tuple[str, str, list[ast.expr]]]:
    """``(column, operator, value nodes)`` for each predicate of a Column expression."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitAnd | ast.BitOr):
        yield from _py_shapes(node.left, ctx, negated=negated)
        yield from _py_shapes(node.right, ctx, negated=negated)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Invert):
        yield from _py_shapes(node.operand, ctx, negated=not negated)
    elif isinstance(node, ast.Compare) and len(node.ops) == 1:
        found = _py_comparison(node, ctx)
        if found:
            column, operator, value = found
            yield column, ("not " if negated else "") + operator, [value]
    elif isinstance(node, ast.Call):
        found_call = _py_method_predicate(node, ctx)
        if found_call:
            column, operator, values = found_call
            yield column, _negate(operator) if negated else operator, values


def _negate(operator: str) -> str:
    return operator.replace("is ", "is not ") if operator.startswith("is ") else "not " + operator


def _py_comparison(node: ast.Compare, ctx: _Py) -> tuple[str, str, ast.expr] | None:
    operator = _PY_OPERATORS.get(type(node.ops[0]))
    if operator is None:
        return None
    left, right = node.left, node.comparators[0]
    column = _py_column(left, ctx)
    if column is not None and _py_column(right, ctx) is None:
        return column, operator, right
    column = _py_column(right, ctx)
    if column is not None and _py_column(left, ctx) is None:
        return column, _FLIPPED.get(operator, operator), left
    return None


_METHOD_PREDICATES = {
    "between": "between",
    "isin": "in",
    "like": "like",
    "ilike": "ilike",
    "rlike": "rlike",
    "startswith": "like",
    "endswith": "like",
    "contains": "like",
    "isNull": "is null",
    "isNotNull": "is not null",
}


def _py_method_predicate(call: ast.Call, ctx: _Py) -> tuple[str, str, list[ast.expr]] | None:
    operator = _METHOD_PREDICATES.get(_call_name(call))
    receiver = _receiver(call)
    column = _py_column(receiver, ctx) if receiver is not None else None
    if operator is None or column is None:
        return None
    values: list[ast.expr] = list(call.args)
    if len(values) == 1 and isinstance(values[0], ast.List | ast.Tuple | ast.Set):
        values = list(values[0].elts)
    return column, operator, values


def _py_add_filter(
    table: str | None,
    column: str,
    operator: str,
    values: list[ast.expr],
    ranges: _Ranges,
    ctx: _Py,
) -> None:
    rendered = [_py_value(v, column, ctx) for v in values[:MAX_VALUES]]
    if len(values) > MAX_VALUES:
        rendered.append(f"... {len(values) - MAX_VALUES} more")
    fact = FilterFact(
        column=column,
        table=table,
        operator=operator,
        values=rendered,
        partition_like=_partition_like(column),
    )
    ctx.facts.add(fact)
    if not operator.startswith("not "):
        moments = [_py_moment(v, column, ctx) for v in values]
        ranges.add(table, column, operator, moments)


def _py_value(node: ast.expr, column: str, ctx: _Py) -> str:
    """A filter value for the reader; numbers and days also go to ``literals``."""
    while isinstance(node, ast.Call) and _spark_function(node, ctx) == "lit" and node.args:
        node = node.args[0]
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        if not isinstance(node.value, bool):
            ctx.facts.literal("numbers", str(node.value))
        return str(node.value)
    moment = _py_moment(node, column, ctx)
    if moment is not None and moment.day and not moment.whole_year:
        ctx.facts.literal("dates", moment.render())
    if isinstance(node, ast.Constant):
        return str(node.value)
    text = _py_text(node, ctx)
    if text is not None:
        return _display(text, ctx)
    return moment.render() if moment else ast.unparse(node)


_PY_DATE_MAKERS = frozenset({"date", "datetime"})
_PY_WRAPPERS = frozenset({"lit", "to_date", "to_timestamp", "date", "timestamp"})
_PY_NOW = frozenset({"current_date", "current_timestamp", "now", "today", "utcnow"})


def _py_moment(node: ast.expr, column: str, ctx: _Py) -> _Moment | None:
    """A Python or PySpark date expression as a point in time, when it is constant enough."""
    params = ctx.facts.params
    if isinstance(node, ast.Constant) and isinstance(node.value, str | int):
        text = str(node.value)
        return _literal_moment(text, isinstance(node.value, str), column, params)
    if isinstance(node, ast.Name | ast.JoinedStr):
        bound = _py_text(node, ctx)
        if bound is not None and not _TOKEN_RE.fullmatch(bound):
            return _literal_moment(bound, True, column, params)
        symbol = params.restore(bound) if bound else "{" + ast.unparse(node) + "}"
        return _Moment(None, symbol)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub):
        return _py_moment_arithmetic(node, column, ctx)
    if isinstance(node, ast.Call):
        return _py_moment_call(node, column, ctx)
    return None


def _py_moment_call(call: ast.Call, column: str, ctx: _Py) -> _Moment | None:
    name = _spark_function(call, ctx) or _call_name(call)
    if name in _PY_NOW:
        return _Moment(None, "current_date")
    if name in _PY_DATE_MAKERS and len(call.args) >= 3:
        return _py_date(call.args[:3])
    if name in _PY_WRAPPERS and call.args:
        return _py_moment(call.args[0], column, ctx)
    if name in ("date_add", "date_sub", "add_months") and len(call.args) == 2:
        base = _py_moment(call.args[0], column, ctx)
        amount = call.args[1]
        if (
            base is None
            or not isinstance(amount, ast.Constant)
            or not isinstance(amount.value, int)
        ):
            return None
        sign = -1 if name == "date_sub" else 1
        if name == "add_months":
            return base.shift(months=amount.value)
        return base.shift(sign * amount.value)
    if name == "expr" and call.args:
        text = _py_text(call.args[0], ctx)
        return _sql_text_moment(text, column, ctx.facts.params) if text else None
    return None


def _py_date(args: list[ast.expr]) -> _Moment | None:
    """``date(2024, 1, 31)`` / ``datetime(2024, 1, 31, ...)``."""
    parts = [a.value for a in args if isinstance(a, ast.Constant) and isinstance(a.value, int)]
    if len(parts) != 3:
        return None
    try:
        return _Moment(date(parts[0], parts[1], parts[2]))
    except ValueError:
        return None


def _sql_text_moment(text: str, column: str, params: _Params) -> _Moment | None:
    try:
        node: exp.Expr = exp.maybe_parse(_substitute_parameters(text, params), dialect="spark")
    except (ParseError, TokenError):
        return None
    return _fold_moment(node, column, params)


def _py_moment_arithmetic(node: ast.BinOp, column: str, ctx: _Py) -> _Moment | None:
    """``date(...) - timedelta(days=7)``."""
    base = _py_moment(node.left, column, ctx)
    delta = node.right
    if base is None or not isinstance(delta, ast.Call) or _call_name(delta) != "timedelta":
        return None
    days = 0
    for keyword in delta.keywords:
        value = keyword.value
        if not isinstance(value, ast.Constant) or not isinstance(value.value, int):
            return None
        days += value.value * {"days": 1, "weeks": 7}.get(keyword.arg or "", 0)
    first = delta.args[0] if delta.args else None
    if isinstance(first, ast.Constant) and isinstance(first.value, int):
        days += first.value
    return base.shift(days if isinstance(node.op, ast.Add) else -days)


# --------------------------------------------------------------------------- Python: the rest


def _py_group(call: ast.Call, ctx: _Py) -> None:
    if "Window" in _chain_names(call):
        return
    width = 0
    for arg in call.args:
        width += len(arg.elts) if isinstance(arg, ast.List | ast.Tuple) else 1
    ctx.facts.group_by_columns += width


def _py_grouped_aggregate(call: ast.Call, ctx: _Py) -> None:
    """``df.groupBy(...).count()`` / ``.sum("x")``: GroupedData shortcuts."""
    receiver = _receiver(call)
    if isinstance(receiver, ast.Call) and _call_name(receiver) in _GROUPERS:
        ctx.facts.aggregations.add(_AGGREGATES[_call_name(call)])


def _py_agg(call: ast.Call, ctx: _Py) -> None:
    """``.agg({"x": "max"})``; Column arguments are seen as function calls."""
    for arg in call.args:
        if isinstance(arg, ast.Dict):
            for value in arg.values:
                name = _py_text(value, ctx) if value is not None else None
                if name in _AGGREGATES:
                    ctx.facts.aggregations.add(_AGGREGATES[name])


def _py_distinct(call: ast.Call, ctx: _Py) -> None:
    ctx.facts.distinct = True


def _py_order(call: ast.Call, ctx: _Py) -> None:
    """``orderBy`` / ``sort`` with columns; a ``Window.orderBy`` only declares a window."""
    if "Window" in _chain_names(call):
        ctx.window_spec = True
    elif call.args:
        ctx.facts.order_by = True


def _py_window_spec(call: ast.Call, ctx: _Py) -> None:
    if "Window" in _chain_names(call):
        ctx.window_spec = True


def _py_union(call: ast.Call, ctx: _Py) -> None:
    """DataFrame unions; ``set.union`` is told apart by sources or the Spark-only names."""
    sources = [_df_source(n, ctx) for n in [_receiver(call), *call.args]]
    if _call_name(call) != "union" or any(s is not None for s in sources):
        ctx.facts.unions += 1


def _py_pandas_map(call: ast.Call, ctx: _Py) -> None:
    function = call.args[0] if call.args else _keyword(call, "func")
    name = _callable_name(function) if function is not None else "?"
    ctx.facts.udfs.add(f"{_call_name(call)}:{name}")


def _py_rdd(call: ast.Call, ctx: _Py) -> None:
    if "rdd" in _chain_names(_receiver(call)):
        ctx.facts.udfs.add(f"rdd.{_call_name(call)}")


def _py_register(call: ast.Call, ctx: _Py) -> None:
    """``spark.udf.register("name", f)`` makes ``name`` callable from SQL."""
    if "udf" in _chain_names(_receiver(call)):
        name = _py_string_arg(call, 0, ("name",), ctx)
        if name is not None:
            ctx.facts.udfs.add(f"udf:{name}")


def _py_estimator(call: ast.Call, name: str, ctx: _Py) -> None:
    """An MLlib estimator; numeric hyper-parameters (``maxIter=10``) go to ``literals``."""
    ctx.facts.ml_estimators[name] = None
    for keyword in call.keywords:
        value = keyword.value.value if isinstance(keyword.value, ast.Constant) else None
        if keyword.arg and isinstance(value, int | float):
            ctx.facts.literal("ml_params", f"{name}.{keyword.arg}={value}")


def _py_setter(call: ast.Call, ctx: _Py) -> None:
    """``lr.setMaxIter(10)`` on a variable bound to an estimator."""
    receiver = _receiver(call)
    name = _call_name(call)
    if not isinstance(receiver, ast.Name) or receiver.id not in ctx.estimators:
        return
    if len(call.args) == 1 and isinstance(call.args[0], ast.Constant):
        param = name[3:4].lower() + name[4:]
        value = call.args[0].value
        ctx.facts.literal("ml_params", f"{ctx.estimators[receiver.id]}.{param}={value!s}")


def _py_grid(call: ast.Call, ctx: _Py) -> None:
    """``ParamGridBuilder().addGrid(lr.regParam, [...])``: each value is one more fit."""
    if len(call.args) == 2 and isinstance(call.args[0], ast.Attribute):
        values = call.args[1]
        count = len(values.elts) if isinstance(values, ast.List | ast.Tuple) else "?"
        ctx.facts.literal("ml_params", f"grid.{call.args[0].attr}={count} values")


def _py_partitions(call: ast.Call, ctx: _Py) -> None:
    if call.args and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, int):
        ctx.facts.literal("partitions", f"{_call_name(call)}={call.args[0].value}")


def _py_conf(call: ast.Call, ctx: _Py) -> None:
    """``spark.conf.set("spark.sql.shuffle.partitions", 400)``: settings that change the plan."""
    if "conf" not in _chain_names(_receiver(call)) or len(call.args) != 2:
        return
    key = _py_string_arg(call, 0, (), ctx)
    value = call.args[1]
    if key is not None and isinstance(value, ast.Constant):
        ctx.facts.literal("spark_conf", f"{key}={value.value!s}")


def _py_parameter(call: ast.Call, name: str, ctx: _Py) -> None:
    """Inputs the job takes: widgets, environment, argparse options, custom conf."""
    if name not in ("get", "getArgument", "getenv", "add_argument") or not call.args:
        return
    dotted = ast.unparse(call.func)
    key = _py_string_arg(call, 0, (), ctx)
    if key is None:
        return
    if dotted.endswith("widgets.get") or name == "getArgument":
        ctx.facts.params.token(f'dbutils.widgets.get("{key}")')
    elif dotted in ("os.environ.get", "os.getenv", "environ.get", "getenv"):
        ctx.facts.params.token(f'os.environ["{key}"]')
    elif name == "add_argument":
        ctx.facts.params.token(key)
    elif dotted.endswith("conf.get") and not key.startswith("spark."):
        ctx.facts.params.token(f'spark.conf.get("{key}")')


def _py_argv(node: ast.Attribute, ctx: _Py) -> None:
    """``sys.argv[1]`` and ``os.environ["X"]`` reads."""
    if not isinstance(node.value, ast.Name):
        return
    if (node.value.id, node.attr) not in (("sys", "argv"), ("os", "environ")):
        return
    parent = ctx.parents.get(id(node))
    used = parent if isinstance(parent, ast.Subscript) and parent.value is node else node
    if isinstance(used, ast.Subscript) or node.attr == "argv":
        ctx.facts.params.token(ast.unparse(used))


_PY_HANDLERS: dict[str, Callable[[ast.Call, _Py], None]] = {
    "sql": _py_sql,
    **dict.fromkeys(_READ_FORMATS | _WRITE_FORMATS, _py_read_write),
    **dict.fromkeys(_WRITE_TABLES, _py_write_table),
    **dict.fromkeys(_TEMP_VIEWS, _py_temp_view),
    "forName": _py_delta,
    "forPath": _py_delta,
    **dict.fromkeys(("merge", "update", "delete"), _py_delta_write),
    "join": _py_join,
    "crossJoin": _py_cross_join,
    "filter": _py_filter,
    "where": _py_filter,
    **dict.fromkeys(("groupBy", "groupby", "rollup", "cube"), _py_group),
    **dict.fromkeys(("count", "sum", "avg", "mean", "max", "min"), _py_grouped_aggregate),
    "agg": _py_agg,
    **dict.fromkeys(("distinct", "dropDuplicates", "drop_duplicates"), _py_distinct),
    **dict.fromkeys(("orderBy", "sort"), _py_order),
    **dict.fromkeys(("partitionBy", "rowsBetween", "rangeBetween"), _py_window_spec),
    **dict.fromkeys(("union", "unionAll", "unionByName"), _py_union),
    **dict.fromkeys(_PANDAS_MAPS, _py_pandas_map),
    **dict.fromkeys(_RDD_OPS - {"filter"}, _py_rdd),
    "register": _py_register,
    "selectExpr": _py_select_expr,
    "addGrid": _py_grid,
    **dict.fromkeys(("repartition", "coalesce", "repartitionByRange"), _py_partitions),
    "set": _py_conf,
}
