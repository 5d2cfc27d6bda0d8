"""The FROM/JOIN sources of each query block, and which source a column belongs to."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from sqlglot import exp

from autofe.tools.profile_script.placeholders import _Params


def _table_name(table: exp.Expr, params: _Params) -> str:
    """A table as written (catalog.db.name), parameters put back.

    >>> import sqlglot
    >>> _table_name(sqlglot.parse_one("select * from c.d.t x").find(exp.Table), _Params())
    'c.d.t'
    """
    if isinstance(table, exp.Table):
        parts = [table.catalog, table.db, table.name]
        return params.restore(".".join(p for p in parts if p))
    if isinstance(table, exp.Directory) and isinstance(table.this, exp.Expr):
        return params.restore(table.this.name)
    return params.restore(table.sql(dialect="spark"))


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
