"""The accumulator every reader adds to; turned into a ``ScriptProfile`` once at the end."""

from __future__ import annotations

from dataclasses import dataclass, field

from autofe.tools.profile_script.models import DateRange, FilterFact, JoinFact, _clip
from autofe.tools.profile_script.placeholders import _Params


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
