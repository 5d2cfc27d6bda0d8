"""Static leakage check: prove from the SQL alone that a feature only sees the past.

A feature returns ``(run_id, value)``; the value for a run may depend only on what was known
when that run was submitted. This check reads the query's lineage with sqlglot (qualified with
the catalog's types; every scope instantiated per reference, so a CTE read twice is two sets
of row sources) and rejects what it cannot prove. It never touches the database: the column
tags of ``ctx.catalog`` say what is post-execution. The dynamic perturbation check runs
afterwards for what static reasoning cannot decide.

Semantics, as implemented:

- **Target.** The row source whose ``run_id`` is the outermost SELECT's first column, traced
  through CTEs, derived tables, scalar subqueries and every UNION branch as a plain column or
  group key (``COALESCE(a.run_id, b.run_id)`` or ``ANY_VALUE(run_id)`` is not traced). Its
  ``submit_time`` is the cutoff T. Every source tied to it by ``run_id`` / ``app_key``
  equality (ON / WHERE, ``x IN (SELECT ...)`` anywhere) is the target run too.
- **Bounds** come only from conjuncts that filter a source's rows: WHERE and inner-join ON of
  the scope reading it (an outer join's ON filters only its null-supplying side), correlated
  conjuncts in subqueries (scalar, EXISTS, IN, LATERAL), and conjuncts on a CTE / derived
  column that passes the source column through row for row (not across LIMIT, DISTINCT ON,
  a scalar subquery or an aggregate: ``MAX(end_time) < T`` keeps a group because of its
  latest run). ``x < T``, ``T > x``, ``NOT (x >= T)``, ``x < T - INTERVAL n``,
  ``x < date_trunc(.., T)``, ``epoch(x) < epoch(T)`` and ``x <= (SELECT MAX(y) ...)`` with y
  bounded compose transitively; ``x <= T`` and ``BETWEEN .. AND T`` are inclusive. A bound
  under OR, in HAVING / QUALIFY, in an aggregate's FILTER or in a CASE proves nothing.
- **Who needs which bound.** ``jobs`` and ``cluster_configs`` are static definitions and need
  none. Another run's known-at-submit columns, and the mere existence of its row
  (``COUNT(*)``), need ``submit_time <= T`` (or any end bound); its post-execution columns
  need ``end_time < T``, directly or through the run it is tied to (a child table joined by
  run_id / app_key to such a run, or ``applications.end_time < T``). Rows of applications,
  stages, spark_jobs, sql_executions and executors are post-execution through and through.
  ``table_stats`` rows need ``as_of <= T`` (``SNAPSHOT_CUTOFF``; ``as_of < T`` passes too): a
  snapshot taken at the instant of submission was written before the run was submitted.
  ``run_attributes.value`` / ``value_text`` are post-execution unless the query filters
  ``availability = 'known_at_submit'``; then they are the run's own known facts.
- **Windows.** A window function reads *frame rows*, modelled as a row source of their own:
  they keep the bounds that filter the whole windowed row set (conjuncts in the windowed
  scope or below it, including correlated ones; ``PARTITION BY`` a run id ties them to the
  current row's run), and an ascending ORDER BY on a timestamp with a frame ending at or
  before the current row bounds them by the current row's timestamp. LEAD, FOLLOWING frames,
  DESC orders, NTILE / PERCENT_RANK / CUME_DIST and windows without ORDER BY get no ordering
  bound. So ``LAG(duration_s) OVER (PARTITION BY job_id ORDER BY submit_time)`` is rejected
  (an earlier-submitted run may still be running at T) while a window over rows already
  bounded by ``end_time < T`` is admitted. A frame that contains the current row also reads
  the current row itself.
- **Uses.** Every column a live scope reads counts (projections as demanded by the outer
  query, plus WHERE, ON, GROUP BY, HAVING, QUALIFY, ORDER BY), as does every source's row
  existence; CTE columns nobody reads do not. ``COLUMNS(...)`` and stars qualify cannot
  expand read every column.
- **Codes** (``Leakage``): one reason per offending row source with its most specific code,
  most specific first: LABEL (the target's ``duration_s``, or its end and start times
  together), SAME_RUN, WINDOW_FUTURE (followed by the frame rows' own code, e.g.
  UNBOUNDED_HISTORY), LATE_SNAPSHOT, INCLUSIVE_CUTOFF, UNBOUNDED_HISTORY, FUTURE_ROWS (rows
  not bounded to earlier submissions, or explicitly at or after T). Each names the column and
  carries the span ``sql[start:end]`` of the offending reference.

SQL that does not parse or qualify (unknown columns, several statements) yields no reasons:
the completeness gate reports those.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import replace

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import Scope, build_scope, find_all_in_scope

from autofe.featurespec import FeatureSpec
from autofe.gates.codes import Leakage
from autofe.gates.context import GateContext, Reason
from autofe.gates.leakage_lineage import (
    CLOCKS,
    IDENTITY,
    KNOWN,
    RUN_ATTRIBUTE_VALUES,
    SNAPSHOT_CUTOFF,
    Bound,
    Clock,
    Env,
    Fact,
    Key,
    Kind,
    KnownOnly,
    Level,
    Mode,
    Reading,
    Source,
    Tie,
    Use,
    WindowRead,
    env_chain,
    instantiate,
    lookup,
    row_sources,
)
from autofe.gates.leakage_sql import (
    MONOTONE,
    ascending,
    below,
    filtered_column,
    frame_includes_current,
    is_literal,
    monotone,
    operand_key,
    orderings,
    picks_rows,
    positive_interval,
    preceding_only,
    projection_of,
    reads_every_column,
    restrictions,
    span_of,
    strip,
    through_aggregate,
    width,
    window_shape,
)
from autofe.sandbox.nesting import NestedTooDeeply, parse_statements
from autofe.warehouse.catalog import WarehouseCatalog

GATE = "leakage"

SEVERITY: tuple[Leakage, ...] = (
    Leakage.LABEL,
    Leakage.SAME_RUN,
    Leakage.WINDOW_FUTURE,
    Leakage.LATE_SNAPSHOT,
    Leakage.INCLUSIVE_CUTOFF,
    Leakage.UNBOUNDED_HISTORY,
    Leakage.FUTURE_ROWS,
)
"""Most specific first: each offending source gets its earliest code here, and the reasons
come in this order."""


def check_static_leakage(spec: FeatureSpec, ctx: GateContext) -> list[Reason]:
    """Reject a feature whose SQL is not proven to use only facts known at submit time.

    Args:
        spec: the feature; ``spec.sql`` returns ``(run_id, value)``.
        ctx: gate context; only ``ctx.catalog`` (types and availability tags) is read.

    Returns:
        One reason per offending row source, most specific first; empty when admitted or
        when the SQL does not parse or qualify (the completeness gate reports that).

    >>> from pathlib import Path
    >>> from autofe.warehouse.catalog import code_catalog
    >>> ctx = GateContext(db=Path("unused"), catalog=code_catalog())
    >>> own = FeatureSpec(name="own", sql="SELECT run_id, duration_s FROM runs",
    ...                   category="history")
    >>> [(r.code, r.column) for r in check_static_leakage(own, ctx)]
    [('label_leak', 'runs.duration_s')]
    >>> prev = FeatureSpec(name="prev", category="history", sql='''
    ...     SELECT t.run_id, (SELECT AVG(h.duration_s) FROM runs h
    ...                       WHERE h.job_id = t.job_id AND h.end_time < t.submit_time)
    ...     FROM runs t''')
    >>> check_static_leakage(prev, ctx)
    []
    """
    root = _qualified(spec.sql, ctx.catalog)
    if root is None:
        return []
    return _Analysis(ctx.catalog, root).reasons()


def _qualified(sql: str, catalog: WarehouseCatalog) -> Scope | None:
    """The root scope of the one qualified query in ``sql``, or None if sqlglot cannot say
    (or the query is nested too deeply for the recursive walks below)."""
    try:
        statements = [s for s in parse_statements(sql) if s is not None]
        if len(statements) != 1 or not isinstance(statements[0], exp.Query):
            return None
        schema: dict[str, object] = dict(catalog.schema)
        tree = qualify(statements[0], schema=schema, dialect="duckdb")
        return build_scope(tree)
    except (SqlglotError, NestedTooDeeply):
        return None


# --- the analysis ----------------------------------------------------------------------------


class _Analysis:
    """Facts (bounds, ties) and uses of one query, solved into per-source time bounds."""

    def __init__(self, catalog: WarehouseCatalog, root: Scope) -> None:
        self.catalog = catalog
        self.envs: list[Env] = []
        self.root = instantiate(root, None, self.envs)
        self.facts: list[Fact] = []
        self.uses: list[Use] = []
        self.windows: list[WindowRead] = []
        self.frames: dict[tuple[int, Source], Source] = {}
        self.live: set[int] = set()
        self.demanded: set[tuple[int, str | int, int, bool]] = set()
        self.ub: dict[Key, Level] = {}
        self.lb: dict[Key, Level] = {}
        self.targets: set[Source] = set()
        self.known_only: set[Source] = set()

    # lineage -------------------------------------------------------------------------------

    def passthrough(self, env: Env, key: str | int, mode: Mode) -> list[tuple[Source, str]] | None:
        """The warehouse columns an output column of ``env`` stands for, if it merely passes
        them through (every UNION branch must)."""
        if mode == "filter" and picks_rows(env.scope.expression):
            return None
        if env.select is None:
            return self._passthrough_branches(env, key, mode)
        projection = projection_of(env.select, key)
        passed = through_aggregate(env.select, projection, mode) if projection else None
        return self._operand(env, passed, mode) if passed is not None else None

    def _passthrough_branches(
        self, env: Env, key: str | int, mode: Mode
    ) -> list[tuple[Source, str]] | None:
        branch_key = operand_key(env, key)
        if branch_key is None:
            return None
        leaves: list[tuple[Source, str]] = []
        for branch in env.branches:
            found = self.passthrough(branch, branch_key, mode)
            if found is None:
                return None
            leaves += found
        return leaves or None

    def passthrough_column(
        self, env: Env, column: exp.Column, mode: Mode
    ) -> list[tuple[Source, str]] | None:
        found = lookup(env, column.table) if column.table else None
        if isinstance(found, Source):
            return [(found, column.name)]
        if isinstance(found, Env):
            return self.passthrough(found, column.name, mode)
        return None

    def _operand(self, env: Env, node: exp.Expr, mode: Mode) -> list[tuple[Source, str]] | None:
        """What a predicate operand stands for: a column, or a scalar subquery's column."""
        node = strip(node)
        if isinstance(node, exp.Subquery):
            node = node.this
        if isinstance(node, exp.Query):
            sub = env.subqueries.get(id(node)) if mode != "filter" else None
            return self.passthrough(sub, 0, mode) if sub else None
        if isinstance(node, exp.Column):
            return self.passthrough_column(env, node, mode)
        return None

    # facts ---------------------------------------------------------------------------------

    def collect_facts(self) -> None:
        for env in self.envs:
            if env.select is None:
                continue
            for conjunct, filtered in restrictions(env.select, frozenset(env.sources)):
                self._facts_from(env, conjunct, filtered)
            for membership in find_all_in_scope(env.select, exp.In):
                self._member_rows(env, membership)

    def _member_rows(self, env: Env, membership: exp.In) -> None:
        """Wherever ``x IN (SELECT y ...)`` appears, only subquery rows with ``y = x`` decide
        it: they belong to x's run."""
        query = membership.args.get("query")
        if query is not None:
            inner = self._operand(env, query, "selected") or []
            self._ties(inner, self._operand(env, membership.this, "selected") or [], env)

    def _facts_from(self, env: Env, predicate: exp.Expr, filtered: frozenset[str]) -> None:
        for small, big, strict in orderings(predicate):
            self._bound(env, small, big, strict, filtered, upper=True)
            self._bound(env, big, small, strict, filtered, upper=False)
        if isinstance(predicate, exp.EQ):
            self._equality(env, predicate.this, predicate.expression, filtered)
            self._equality(env, predicate.expression, predicate.this, filtered)
        elif isinstance(predicate, exp.In):
            self._membership(env, predicate, filtered)

    def _bound(
        self,
        env: Env,
        subject: exp.Expr,
        other: exp.Expr,
        strict: bool,
        filtered: frozenset[str],
        upper: bool,
    ) -> None:
        """``subject < other`` (``upper``) or ``subject > other``: a bound on the rows
        ``subject`` reads."""
        lhs = self._lhs_keys(env, subject, filtered)
        rhs = self._reference(env, other, upper) if lhs else None
        if rhs is None:
            return
        keys, shifted = rhs
        for key in lhs:
            self.facts.append(Bound(key, strict or shifted, keys, env, upper))

    def _lhs_keys(self, env: Env, node: exp.Expr, filtered: frozenset[str]) -> list[Key]:
        node = strip(node)
        while isinstance(node, MONOTONE):
            node = node.this
        column = filtered_column(env, node, filtered)
        leaves = self.passthrough_column(env, column, "filter") if column else None
        return [(s, CLOCKS[(s.table, c)]) for s, c in leaves or [] if (s.table, c) in CLOCKS]

    def _reference(
        self, env: Env, node: exp.Expr, upper: bool
    ) -> tuple[tuple[Key, ...], bool] | None:
        """The keys a value is at most (``upper``) or at least, and whether strictly."""
        node = strip(node)
        shift = exp.Sub if upper else exp.Add
        if isinstance(node, shift) and positive_interval(node.expression):
            inner = self._reference(env, node.this, upper)
            return (inner[0], True) if inner else None
        inner_node = below(node) if upper else monotone(node)
        if inner_node is not None:
            return self._reference(env, inner_node, upper)
        leaves = self._operand(env, node, "selected")
        if not leaves or any((s.table, c) not in CLOCKS for s, c in leaves):
            return None
        return tuple((s, CLOCKS[(s.table, c)]) for s, c in leaves), False

    def _equality(self, env: Env, a: exp.Expr, b: exp.Expr, filtered: frozenset[str]) -> None:
        """``a = b`` seen from ``a``'s side: a time bound, a known-only filter, or a tie."""
        column = filtered_column(env, strip(a), filtered)
        if column is None:
            return
        if is_literal(strip(b), KNOWN):
            self._known_only(env, column)
        mine = self.passthrough_column(env, column, "filter")
        self._ties(mine or [], self._operand(env, b, "selected") or [], env)

    def _membership(self, env: Env, predicate: exp.In, filtered: frozenset[str]) -> None:
        """As a filter, ``x IN (SELECT y ...)`` also ties x's rows to the subquery's;
        ``availability IN ('known_at_submit')`` is a known-only filter."""
        column = filtered_column(env, strip(predicate.this), filtered)
        query = predicate.args.get("query")
        values = predicate.expressions
        if column is None:
            return
        if query is None and values and all(is_literal(v, KNOWN) for v in values):
            self._known_only(env, column)
        elif query is not None:
            outer = self.passthrough_column(env, column, "filter") or []
            self._ties(outer, self._operand(env, query, "selected") or [], env)

    def _ties(
        self, mine: list[tuple[Source, str]], other: list[tuple[Source, str]], env: Env
    ) -> None:
        for src, col in mine:
            for dst, dst_col in other:
                if col == dst_col and col in IDENTITY and src is not dst:
                    self.facts.append(Tie(src, dst, env))

    def _known_only(self, env: Env, column: exp.Column) -> None:
        for src, col in self.passthrough_column(env, column, "filter") or []:
            if src.table == "run_attributes" and col == "availability":
                self.facts.append(KnownOnly(src, env))

    # uses ----------------------------------------------------------------------------------

    def collect_uses(self) -> None:
        self.make_live(self.root)
        for index in range(width(self.root.scope.expression)):
            self.demand(self.root, index, Reading(projected=True))

    def make_live(self, env: Env) -> None:
        """A scope that feeds the output: its rows and every non-projection clause count."""
        if id(env) in self.live:
            return
        self.live.add(id(env))
        for source in env.sources.values():
            if isinstance(source, Source):
                self.uses.append(Use(source, None, source.node))
            else:
                self.make_live(source)
        for branch in env.branches:
            self.make_live(branch)
        for clause in self._clauses(env):
            self.walk(env, clause, Reading())
        if env.scope.expression.args.get("distinct"):
            for index in range(width(env.scope.expression)):
                self.demand(env, index, Reading())

    def _clauses(self, env: Env) -> Iterator[exp.Expr]:
        expression = env.scope.expression
        if env.select is None and not isinstance(expression, exp.SetOperation):
            yield expression
            return
        for name in ("where", "group", "having", "qualify", "order", "limit", "offset"):
            if expression.args.get(name) is not None:
                yield expression.args[name]
        for join in expression.args.get("joins") or []:
            if join.args.get("on") is not None:
                yield join.args["on"]

    def demand(self, env: Env, key: str | int, reading: Reading) -> None:
        """An outer query reads ``env``'s output column ``key``."""
        memo = (id(env), key, id(reading.frame), reading.projected)
        if memo in self.demanded:
            return
        self.demanded.add(memo)
        self.make_live(env)
        branch_key = operand_key(env, key)
        if env.select is None and branch_key is not None:
            for branch in env.branches:
                self.demand(branch, branch_key, reading)
        projection = projection_of(env.select, key) if env.select else None
        if projection is not None:
            self.walk(env, projection, reading)

    def walk(self, env: Env, node: exp.Expr, reading: Reading) -> None:
        """Record the uses in ``node``; nested queries and windows are handled by kind."""
        stack = [node]
        while stack:
            current = stack.pop()
            if isinstance(current, exp.Column):
                self._use_column(env, current, reading)
            elif isinstance(current, exp.Window) and reading.frame is None:
                self._use_window(env, current, reading)
            elif isinstance(current, exp.Query) and not isinstance(current, exp.Subquery):
                self._use_subquery(env, current, reading)
            elif reads_every_column(current):
                self._use_every_column(env, current, reading)
            else:
                stack.extend(current.iter_expressions())

    def _use_column(self, env: Env, column: exp.Column, reading: Reading) -> None:
        if not column.table:
            if env.select is not None and projection_of(env.select, column.name) is not None:
                self.demand(env, column.name, reading)
            return
        found = lookup(env, column.table)
        if isinstance(found, Source):
            for src in self._read_by(found, reading.frame):
                self.uses.append(Use(src, column.name, column, reading.via, reading.projected))
        elif isinstance(found, Env):
            self.demand(found, column.name, replace(reading, via=reading.via or column))

    def _use_every_column(self, env: Env, node: exp.Expr, reading: Reading) -> None:
        """``COLUMNS(...)`` or a star qualify could not expand: assume it reads everything."""
        for source in env.sources.values():
            if isinstance(source, Env):
                for index in range(width(source.scope.expression)):
                    self.demand(source, index, replace(reading, via=reading.via or node))
                continue
            for column in self.catalog.schema.get(source.table, {}):
                for src in self._read_by(source, reading.frame):
                    self.uses.append(Use(src, column, node, reading.via, reading.projected))

    def _use_subquery(self, env: Env, query: exp.Query, reading: Reading) -> None:
        sub = env.subqueries.get(id(query))
        if sub is None:
            return
        self.make_live(sub)
        for index in range(len(query.selects)):
            self.demand(sub, index, Reading(projected=reading.projected))

    def _use_window(self, env: Env, window: exp.Window, reading: Reading) -> None:
        """Function arguments read frame rows; PARTITION BY / ORDER BY read both."""
        shape = window_shape(window, env.select)
        read = WindowRead(shape, env, frozenset(row_sources(env)), frame_includes_current(shape))
        self.windows.append(read)
        self.walk(env, window.this, replace(reading, frame=read))
        for part in (*shape.partition, *shape.order):
            self.walk(env, part, replace(reading, projected=False))
            self.walk(env, part, replace(reading, frame=read, projected=False))

    def _read_by(self, src: Source, frame: WindowRead | None) -> list[Source]:
        """Which rows a column reference reads: the current row, the frame rows, or both."""
        framed = self._framed(src, frame)
        if framed is src or frame is None or not frame.includes_current:
            return [framed]
        return [framed, src]

    def _framed(self, src: Source, frame: WindowRead | None) -> Source:
        if frame is None or src not in frame.rows:
            return src
        key = (id(frame.shape.window), src)
        if key not in self.frames:
            self.frames[key] = Source(src.table, src.alias, frame.shape.window, frame_of=src)
        return self.frames[key]

    # frames --------------------------------------------------------------------------------

    def frame_facts(self) -> None:
        """What the frame rows of each window are known to satisfy (see module docstring)."""
        for read in self.windows:
            self._copy_row_set_facts(read)
            self._partition_ties(read)
            self._order_bound(read)
            for src in read.rows:
                self.uses.append(Use(self._framed(src, read), None, read.shape.window))

    def _copy_row_set_facts(self, read: WindowRead) -> None:
        """Conjuncts filtering the windowed rows hold for every frame row too."""
        chain = set(map(id, env_chain(read.env)))
        for fact in list(self.facts):
            if id(fact.where) not in chain:
                continue
            if isinstance(fact, Bound) and fact.lhs[0] in read.rows:
                rhs = tuple((self._framed(s, read), c) for s, c in fact.rhs)
                lhs = (self._framed(fact.lhs[0], read), fact.lhs[1])
                self.facts.append(replace(fact, lhs=lhs, rhs=rhs))
            elif isinstance(fact, Tie) and fact.src in read.rows:
                other = self._framed(fact.other, read)
                self.facts.append(Tie(self._framed(fact.src, read), other, fact.where))
            elif isinstance(fact, KnownOnly) and fact.src in read.rows:
                self.facts.append(KnownOnly(self._framed(fact.src, read), fact.where))

    def _partition_ties(self, read: WindowRead) -> None:
        for part in read.shape.partition:
            for src, col in self._operand(read.env, part, "pick") or []:
                if col in IDENTITY and src in read.rows:
                    self.facts.append(Tie(self._framed(src, read), src, read.env))

    def _order_bound(self, read: WindowRead) -> None:
        """Frame rows sort at or before the current row: bounded by its ordering timestamp."""
        shape = read.shape
        if not preceding_only(shape) or not ascending(shape.order[0]):
            return
        for src, col in self._operand(read.env, shape.order[0].this, "pick") or []:
            clock = CLOCKS.get((src.table, col))
            if clock is not None and src in read.rows:
                lhs = (self._framed(src, read), clock)
                self.facts.append(Bound(lhs, False, ((src, clock),), read.env))

    # solving -------------------------------------------------------------------------------

    def solve(self) -> None:
        self.targets = self._target_class()
        self.known_only = {f.src for f in self.facts if isinstance(f, KnownOnly)}
        for src in self.targets:
            if src.table == "runs":
                self.ub[(src, Clock.SUBMIT)] = Level.INCLUSIVE
                self.lb[(src, Clock.SUBMIT)] = Level.INCLUSIVE
        for _ in range(len(self.facts) + 2):
            if not self._propagate():
                break

    def _target_roots(self) -> list[Source]:
        leaves = self.passthrough(self.root, 0, "pick") or []
        return [src for src, col in leaves if col == "run_id"]

    def _target_class(self) -> set[Source]:
        """The target and every source tied to it (ties read both ways: conservative)."""
        members = set(self._target_roots())
        ties = [f for f in self.facts if isinstance(f, Tie)]
        grown = True
        while grown:
            grown = False
            for tie in ties:
                if (tie.src in members) != (tie.other in members):
                    members |= {tie.src, tie.other}
                    grown = True
        return members

    def _propagate(self) -> bool:
        changed = False
        for fact in self.facts:
            if isinstance(fact, Bound):
                level = min((self.level(*k, fact.upper) for k in fact.rhs), default=Level.UNKNOWN)
                if level and fact.strict:
                    level = Level.STRICT
                changed |= self._raise(fact.lhs, level, fact.upper)
            elif isinstance(fact, Tie):
                changed |= self._inherit(fact.src, fact.other)
        for (src, clock), level in list(self.ub.items()):
            if clock is Clock.END:
                # A run is submitted before it ends, so an end bound bounds its submit too.
                changed |= self._raise((src, Clock.SUBMIT), level, True)
        return changed

    def _inherit(self, src: Source, run: Source) -> bool:
        """Rows tied to a run share its submit and end times."""
        changed = False
        for clock in (Clock.SUBMIT, Clock.END):
            for upper in (True, False):
                changed |= self._raise((src, clock), self.level(run, clock, upper), upper)
        return changed

    def level(self, src: Source, clock: Clock, upper: bool = True) -> Level:
        return (self.ub if upper else self.lb).get((src, clock), Level.UNKNOWN)

    def _raise(self, key: Key, level: Level, upper: bool) -> bool:
        if level > self.level(*key, upper):
            (self.ub if upper else self.lb)[key] = level
            return True
        return False

    # judging -------------------------------------------------------------------------------

    def kind(self, table: str) -> Kind:
        if table == "runs":
            return "runs"
        if (table, "as_of") in CLOCKS:
            return "snapshot"
        if any(self.catalog.info(table, c) for c in IDENTITY):
            return "run_child"
        return "static"

    def is_post(self, use: Use) -> bool:
        table = use.src.table
        if table == "run_attributes" and use.column in (None, *RUN_ATTRIBUTE_VALUES):
            return use.src not in self.known_only
        if use.column is None:
            return self.kind(table) == "run_child"
        return self.catalog.is_post_execution(table, use.column)

    def judge(self, use: Use) -> Leakage | None:
        src = use.src
        kind = self.kind(src.table)
        if kind == "static":
            return None
        if kind == "snapshot":
            late = self.level(src, Clock.AS_OF) < SNAPSHOT_CUTOFF
            return Leakage.LATE_SNAPSHOT if late else None
        post = self.is_post(use)
        if src in self.targets:
            if not post:
                return None
            return Leakage.LABEL if use.column == "duration_s" else Leakage.SAME_RUN
        code = self._other_run_code(src, post)
        if code and self.level(src, Clock.SUBMIT, upper=False):
            return Leakage.FUTURE_ROWS
        return code

    def _other_run_code(self, src: Source, post: bool) -> Leakage | None:
        end = self.level(src, Clock.END)
        if not post:
            return None if max(end, self.level(src, Clock.SUBMIT)) else Leakage.FUTURE_ROWS
        if end is Level.STRICT:
            return None
        return Leakage.INCLUSIVE_CUTOFF if end is Level.INCLUSIVE else Leakage.UNBOUNDED_HISTORY

    # reporting -----------------------------------------------------------------------------

    def reasons(self) -> list[Reason]:
        self.collect_facts()
        self.collect_uses()
        self.frame_facts()
        self.solve()
        failures: dict[Source, list[tuple[Leakage, Use]]] = {}
        for use in self.uses:
            code = self.judge(use)
            if code is not None:
                failures.setdefault(use.src, []).append((code, use))
        reasons = [r for src, found in failures.items() for r in self._source_reasons(src, found)]
        return _dedupe(sorted(reasons, key=lambda r: SEVERITY.index(Leakage(r.code))))

    def _source_reasons(self, src: Source, found: list[tuple[Leakage, Use]]) -> list[Reason]:
        """The most specific failure of one source; a window's frame also says why its rows
        are not earlier (the window itself is the most specific cause)."""
        code = min((c for c, _ in found), key=SEVERITY.index)
        uses = [u for c, u in found if c is code]
        if code is Leakage.SAME_RUN and _reconstructs_label(src, uses):
            code = Leakage.LABEL
        use = min(uses, key=lambda u: self._telling(u, code))
        reasons = [self._reason(code, use)]
        if src.frame_of is not None and code not in (Leakage.LABEL, Leakage.SAME_RUN):
            reasons.insert(0, self._reason(Leakage.WINDOW_FUTURE, use))
        return reasons

    def _telling(self, use: Use, code: Leakage) -> tuple[bool, ...]:
        """Sort key: name a value column of the output before a join key or a bare row."""
        return (
            not (code is Leakage.LABEL and use.column in ("duration_s", "end_time")),
            use.column is None,
            not use.projected,
            use.column in IDENTITY,
            not self.is_post(use),
            self.is_post(use) and (use.src.table, use.column) in CLOCKS,
        )

    def _reason(self, code: Leakage, use: Use) -> Reason:
        src = use.src
        after = bool(self.level(src, Clock.SUBMIT, upper=False))
        message = _message(code, use, self._cutoff(), bool(self.targets), after)
        span = span_of(use.node, use.via, src.node)
        return Reason(GATE, code.value, message, span, f"{src.table}.{use.column or '*'}")

    def _cutoff(self) -> str:
        runs = sorted(s.alias for s in self.targets if s.table == "runs" and s.frame_of is None)
        return f"{runs[0]}.submit_time" if runs else "the target's submit_time"


def _reconstructs_label(src: Source, uses: list[Use]) -> bool:
    """The target's end_time together with its start_time is its duration."""
    columns = {u.column for u in uses}
    return src.table == "runs" and {"end_time", "start_time"} <= columns


def _dedupe(reasons: Iterable[Reason]) -> list[Reason]:
    """A CTE read twice fails twice in the same place: report it once."""
    seen: set[tuple[str, str | None, tuple[int, int] | None]] = set()
    out = []
    for reason in reasons:
        key = (reason.code, reason.column, reason.span)
        if key not in seen:
            seen.add(key)
            out.append(reason)
    return out


_ADVICE: dict[Leakage, str] = {
    Leakage.LABEL: (
        "is the target run's own label (known only after it ends); use earlier runs only, "
        "e.g. a correlated subquery over runs h with h.end_time < {T}"
    ),
    Leakage.SAME_RUN: (
        "is a post-execution value of the target run itself, known only after it ends; "
        "read it from earlier runs bounded by end_time < {T}"
    ),
    Leakage.INCLUSIVE_CUTOFF: (
        "comes from runs bounded only by end_time <= {T} (or >=, BETWEEN): a run ending "
        "exactly at submit is not known yet; use a strict end_time < {T}"
    ),
    Leakage.UNBOUNDED_HISTORY: (
        "is a post-execution value of other runs with no bound end_time < {T} (a submit_time "
        "bound does not prove a run had ended; OR, HAVING and CASE bounds do not count); "
        "add end_time < {T} where those rows are read"
    ),
    Leakage.FUTURE_ROWS: (
        "is read from runs not limited to those submitted before the target; add "
        "submit_time < {T} (or end_time < {T}) where those rows are read"
    ),
    Leakage.WINDOW_FUTURE: (
        "is read by a window whose frame is not proven to lie before {T}: LEAD, FOLLOWING "
        "frames, DESC orders and whole-partition windows see later rows, and ordering by "
        "submit_time does not prove earlier runs had ended (runs overlap); use a correlated "
        "subquery over runs h with h.end_time < {T} instead"
    ),
    Leakage.LATE_SNAPSHOT: (
        "is read from table_stats snapshots not limited to as_of <= {T}, so snapshots taken "
        "after submission leak in; add {A}.as_of <= {T} where those rows are read (a bound under "
        "OR, HAVING or CASE, or one later than {T}, does not count)"
    ),
}


_AFTER = (
    "is read from runs submitted at or after the target (a submit_time >= {T} bound): they "
    "are the future; read only runs with submit_time < {T} (end_time < {T} for "
    "post-execution values)"
)


def _message(code: Leakage, use: Use, cutoff: str, has_target: bool, after: bool) -> str:
    src = use.src
    what = f"{src.table}.{use.column}" if use.column else f"the rows of {src.table}"
    where = f" (alias {src.alias}{', in a window' if src.frame_of else ''})"
    advice = _AFTER if after and code is Leakage.FUTURE_ROWS else _ADVICE[code]
    text = f"{what}{where} {advice.format(T=cutoff, A=src.alias)}."
    if not has_target:
        text += (
            " The output's first column does not trace to a run_id, so no row can be"
            " proven earlier than the target run."
        )
    return text
