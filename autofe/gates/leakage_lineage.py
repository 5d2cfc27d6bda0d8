"""The lineage the static leakage check reasons over: row sources, scopes and facts.

A query's scopes are instantiated where they are read (:func:`instantiate`), so a CTE read
twice is two sets of row sources; the analysis in :mod:`autofe.gates.leakage_static` then
records facts about those sources: bounds against the target's submit time, ties to the
target's run, filters to known-at-submit attributes, and the uses that reach the output.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum
from typing import Literal

from sqlglot import exp
from sqlglot.optimizer.scope import Scope


class Level(IntEnum):
    """What the query proves about a timestamp relative to the target's submit time T: at or
    before it (or at or after, for lower bounds), or strictly so."""

    UNKNOWN = 0
    INCLUSIVE = 1
    STRICT = 2


class Clock(StrEnum):
    """The timestamps that order facts (docs/schema.md, "ordered by")."""

    SUBMIT = "submit"
    END = "end"
    AS_OF = "as_of"


CLOCKS: dict[tuple[str, str], Clock] = {
    ("runs", "submit_time"): Clock.SUBMIT,
    ("runs", "end_time"): Clock.END,
    ("applications", "end_time"): Clock.END,
    ("table_stats", "as_of"): Clock.AS_OF,
}
SNAPSHOT_CUTOFF = Level.INCLUSIVE
"""The bound a ``table_stats`` row needs: ``as_of <= T`` (``<`` is stricter, so it passes too).

A snapshot's ``as_of`` is when it was taken, and a row is known from that instant
(docs/schema.md): the lab writes each day's snapshot as of 00:00 UTC with exactly what a run
submitted that day reads, so a run submitted at 00:00 already has it. Like another run's
submit-time facts (``submit_time <= T``) and unlike its end (a run ending at T has not reported
yet), a snapshot is known at the instant it is dated. The dynamic check's worlds agree: they
alter or delete only snapshots with ``as_of > T`` (``world.table_stats_sql``)."""
IDENTITY = ("run_id", "app_key")
"""Columns whose equality ties two row sources to the same run."""
RUN_ATTRIBUTE_VALUES = ("value", "value_text")
KNOWN = "known_at_submit"

Kind = Literal["runs", "snapshot", "run_child", "static"]
Mode = Literal["filter", "pick", "selected"]
"""How a derived column may stand for a source column.

``filter``: row for row, so a filter on it filters the source's rows (no LIMIT, DISTINCT ON
or scalar subquery in between: those pick rows by looking at all of them first). ``pick``:
also one row's value picked by LIMIT or a scalar subquery. ``selected``: also one row's value
picked by an aggregate (MAX, ARG_MAX, ANY_VALUE...). A picked value obeys every bound its rows
obey and belongs to one of their runs, but filtering on it is not filtering those rows
(``MAX(end_time) < T`` keeps a group because of its latest run)."""
SELECTORS = (exp.Max, exp.Min, exp.ArgMax, exp.ArgMin, exp.AnyValue, exp.First, exp.Last)


@dataclass(frozen=True, eq=False)
class Source:
    """One row source: a reference to a warehouse table, or the frame rows a window reads."""

    table: str
    alias: str
    node: exp.Expr
    frame_of: Source | None = None


Key = tuple[Source, Clock]


@dataclass(eq=False)
class Env:
    """A scope instantiated where it is read, so each reference has its own row sources."""

    scope: Scope
    parent: Env | None
    sources: dict[str, Source | Env] = field(default_factory=dict)
    branches: list[Env] = field(default_factory=list)
    """Set-operation operands, or the query inside a LATERAL."""
    subqueries: dict[int, Env] = field(default_factory=dict)
    """Expression subqueries (scalar, EXISTS, IN) by ``id`` of their query node."""

    @property
    def select(self) -> exp.Select | None:
        expression = self.scope.expression
        return expression if isinstance(expression, exp.Select) else None


@dataclass(frozen=True)
class Bound:
    """``lhs < rhs`` / ``lhs <= rhs`` (``upper``) or ``lhs > rhs`` / ``lhs >= rhs`` for the rows
    filtered in ``where``; rhs is at most (at least) every key listed."""

    lhs: Key
    strict: bool
    rhs: tuple[Key, ...]
    where: Env
    upper: bool = True


@dataclass(frozen=True)
class Tie:
    """The rows of ``src`` belong to the run of ``other`` (run_id / app_key equality)."""

    src: Source
    other: Source
    where: Env


@dataclass(frozen=True)
class KnownOnly:
    """A run_attributes source filtered to ``availability = 'known_at_submit'``."""

    src: Source
    where: Env


Fact = Bound | Tie | KnownOnly


@dataclass(frozen=True)
class Use:
    """A source's column (or, when ``column`` is None, its rows) reaching the output."""

    src: Source
    column: str | None
    node: exp.Expr
    via: exp.Expr | None = None
    """The outer reference that demanded it, for a span when ``node`` has none (star
    expansion)."""
    projected: bool = False
    """Part of the output value (not a filter or join key): the best column to name."""


@dataclass(frozen=True)
class WindowShape:
    """A window call with its (possibly named) definition resolved."""

    window: exp.Window
    fn: exp.Expr
    partition: tuple[exp.Expr, ...]
    order: tuple[exp.Ordered, ...]
    spec: exp.WindowSpec | None


@dataclass(frozen=True)
class Reading:
    """How a walk reaches columns: through a window's frame, from an outer reference (``via``),
    and whether as part of the output value or of a filter."""

    frame: WindowRead | None = None
    via: exp.Expr | None = None
    projected: bool = False


@dataclass(frozen=True)
class WindowRead:
    """A window evaluated over the rows of ``env``."""

    shape: WindowShape
    env: Env
    rows: frozenset[Source]
    includes_current: bool
    """The frame contains the current row, so the function reads it too."""


def instantiate(scope: Scope, parent: Env | None, envs: list[Env]) -> Env:
    """Give ``scope`` fresh row sources; CTEs and derived tables are instantiated per read."""
    env = Env(scope, parent)
    envs.append(env)
    if isinstance(scope.expression, exp.SetOperation):
        env.branches = [instantiate(s, env, envs) for s in scope.set_operation_scopes]
    elif scope.is_udtf:
        env.branches = [instantiate(s, env, envs) for s in scope.subquery_scopes]
    elif isinstance(scope.expression, exp.Select):
        _instantiate_select(env, envs)
    return env


def _instantiate_select(env: Env, envs: list[Env]) -> None:
    scope = env.scope
    for name, node in scope.references:
        source = scope.sources.get(name)
        if isinstance(source, Scope):
            env.sources[name] = instantiate(source, env, envs)
        elif isinstance(node, exp.Table):
            env.sources[name] = Source(node.name.lower(), name, node)
    for sub in scope.subquery_scopes:
        env.subqueries[id(sub.expression)] = instantiate(sub, env, envs)


def lookup(env: Env | None, alias: str) -> Source | Env | None:
    """Resolve a table alias from ``env`` outwards (correlated references)."""
    while env is not None:
        found = env.sources.get(alias)
        if found is not None:
            return found
        env = env.parent
    return None


def row_sources(env: Env) -> Iterator[Source]:
    """The warehouse row sources whose rows make up ``env``'s rows."""
    for source in env.sources.values():
        if isinstance(source, Source):
            yield source
        else:
            yield from row_sources(source)
    for branch in env.branches:
        yield from row_sources(branch)


def env_chain(env: Env) -> Iterator[Env]:
    """``env`` and the scopes feeding its FROM: where conjuncts filter rows before a window."""
    yield env
    for source in env.sources.values():
        if isinstance(source, Env):
            yield from env_chain(source)
    for branch in env.branches:
        yield from env_chain(branch)
