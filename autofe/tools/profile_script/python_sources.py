"""DataFrame sources and sinks in PySpark: tables and paths, Delta tables, ``spark.sql``."""

from __future__ import annotations

import ast

from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from autofe.tools.profile_script.placeholders import _substitute_parameters
from autofe.tools.profile_script.python_context import (
    _READ_FORMATS,
    _WRITE_FORMATS,
    _call_name,
    _chain_names,
    _io_direction,
    _Py,
    _py_string_arg,
    _py_text,
    _receiver,
    _spark_function,
)
from autofe.tools.profile_script.sql_facts import _add_functions
from autofe.tools.profile_script.sql_parse import _profile_sql_text


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
