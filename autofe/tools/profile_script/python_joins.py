"""``df.join`` / ``crossJoin`` in PySpark: sides, keys, kind and broadcast hints."""

from __future__ import annotations

import ast

from autofe.tools.profile_script.models import JoinFact, JoinKind
from autofe.tools.profile_script.python_context import (
    _call_name,
    _chain_names,
    _display,
    _keyword,
    _Py,
    _py_string_arg,
    _py_text,
    _receiver,
    _spark_function,
)
from autofe.tools.profile_script.python_sources import _df_source

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

    >>> from autofe.tools.profile_script.facts import _Facts
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
