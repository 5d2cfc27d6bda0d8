"""How deeply nested a statement may be: the one depth check every parser of feature SQL shares.

sqlglot parses parentheses, calls, ``CASE`` and subqueries recursively, so about 50 levels of
them exhaust Python's stack inside its pure-Python parser, and about 500 inside the compiled one
(``sqlglotc``, which autofe installs). Chains of casts, ``AND`` or arithmetic it parses
in a loop, leaving trees as deep as the chain is long that the recursive walks after it (sqlglot's
SQL generator, the leakage gate's conjunct split) cannot follow: ``1::INT`` cast 400 times parses,
yet printing it back overflows the stack, and a ``WHERE`` of 1 000 ``AND``-ed conditions
overflows the leakage gate. Both are refused here, the same way, before any such walk: the
sandbox guard, the gates, prediction and the run summary all parse feature SQL with
:func:`parse_statements` (or check their own parse with :func:`check_depth`).
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from autofe.errors import SandboxViolation

DIALECT = "duckdb"
TOO_DEEP = "statement nested too deeply to check"
MAX_DEPTH = 100
"""Deepest syntax tree let through. The deepest feature among the test fixtures and the knowledge
base is 18 levels; at 100 sqlglot's generator needs about 300 of Python's 1 000 frames, which
leaves room for the callers' own (the MCP server's, the agents')."""


class NestedTooDeeply(SandboxViolation):
    """SQL nested deeper than sqlglot's parser, or the walks of its tree, can follow.

    Callers that would walk the tree next (the leakage gate after the completeness gate) can
    tell it from other refusals and skip the walk.
    """

    def __init__(self, sql: str = "", depth: int | None = None) -> None:
        detail = f": {depth} levels, at most {MAX_DEPTH}" if depth is not None else ""
        super().__init__(TOO_DEEP + detail, sql)


def parse_statements(sql: str) -> list[exp.Expr | None]:
    """sqlglot's statements of ``sql`` (DuckDB dialect), each shallow enough to walk.

    Raises:
        NestedTooDeeply: the parser ran out of stack, or a tree is deeper than MAX_DEPTH.
        SqlglotError: the text does not tokenize or parse (the caller words that).

    >>> [type(t).__name__ for t in parse_statements("SELECT 1; SELECT (((2)))")]
    ['Select', 'Select']
    >>> parse_statements("SELECT " + "(" * 5000 + "1" + ")" * 5000)
    Traceback (most recent call last):
    autofe.sandbox.nesting.NestedTooDeeply: refused: statement nested too deeply to check
    >>> parse_statements("SELECT 1" + "::INT" * 400)
    Traceback (most recent call last):
    autofe.sandbox.nesting.NestedTooDeeply: refused: statement nested too deeply to check: \
402 levels, at most 100
    """
    try:
        trees = sqlglot.parse(sql, read=DIALECT)
    except RecursionError as exc:  # the parser recurses per level; Python's stack is the limit
        raise NestedTooDeeply(sql) from exc
    for tree in trees:
        if tree is not None:
            check_depth(tree, sql)
    return trees


def check_depth(tree: exp.Expr, sql: str) -> None:
    """Refuse ``tree`` (parsed from ``sql``) when it is deeper than :data:`MAX_DEPTH`.

    Raises:
        NestedTooDeeply: naming the depth and the limit.
    """
    depth = tree_depth(tree)
    if depth > MAX_DEPTH:
        raise NestedTooDeeply(sql, depth)


def tree_depth(tree: exp.Expr) -> int:
    """Levels of ``tree``, the root being 1; counted with a stack, so any depth is safe.

    >>> tree_depth(sqlglot.parse_one("1")), tree_depth(sqlglot.parse_one("SELECT abs(-1)"))
    (1, 4)
    """
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in node.iter_expressions())
    return deepest
