"""Joins stated in SQL: JOIN ... ON/USING, WHERE equalities, correlated subqueries, MERGE."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from sqlglot import exp

from autofe.tools.profile_script.facts import _Facts
from autofe.tools.profile_script.models import JoinFact, JoinKind
from autofe.tools.profile_script.placeholders import _Params
from autofe.tools.profile_script.sql_filters import _add_condition, _single_column, _split
from autofe.tools.profile_script.sql_scopes import _resolve, _Scope, _short, _Source, _source


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

    >>> import sqlglot
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

    >>> import sqlglot
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
