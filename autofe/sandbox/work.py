"""The work a query did, counted in rows: a cost that is the same on every machine.

A query's time depends on the machine and on what else runs on it; the rows each operator of
its plan produced do not. The cost gate compares that count on two samples of the warehouse to
see how a feature's cost grows, so its verdict is the same on a fast, a slow or a loaded
machine (a time budget there would not be).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any

from autofe.sandbox.limits import SandboxLimits

PAIRWISE = frozenset({"NESTED_LOOP_JOIN", "BLOCKWISE_NL_JOIN", "CROSS_PRODUCT"})
"""Joins that compare every left row with every right row: their work is the product of their
inputs, however few pairs they keep (a hash join's is its inputs and output)."""


def counting(limits: SandboxLimits) -> SandboxLimits:
    """``limits`` on one thread, for queries whose work is counted.

    Under several threads an operator under a ``LIMIT`` reads as many rows as the threads
    reach first, so the count would vary from run to run.
    """
    return replace(limits, threads=1)


def _operators(node: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    yield node
    for child in node.get("children", ()):
        yield from _operators(child)


def plan_work(profile: Mapping[str, Any]) -> int:
    """Rows every operator of a profiled plan produced, plus the pairs pairwise joins compared.

    Args:
        profile: DuckDB's ``EXPLAIN (ANALYZE, FORMAT json)`` output, parsed.

    >>> scan = {"type": "TABLE_SCAN", "intermediate_rows": 100, "children": []}
    >>> plan_work({"operator": [{"type": "HASH_JOIN", "intermediate_rows": 30,
    ...                          "children": [scan, scan]}]})
    230
    >>> plan_work({"operator": [{"type": "NESTED_LOOP_JOIN", "intermediate_rows": 5,
    ...                          "children": [scan, scan]}]})
    10205
    """
    work = 0
    for root in profile.get("operator", ()):
        for op in _operators(root):
            work += int(op.get("intermediate_rows") or 0)
            if op.get("type") in PAIRWISE:
                sides = [int(c.get("intermediate_rows") or 0) for c in op.get("children", ())]
                if len(sides) == 2:
                    work += sides[0] * sides[1]
    return work
