"""The ``ast``-based PySpark reader: walks a module and hands each call to its handler."""

from __future__ import annotations

import ast
from collections.abc import Callable

from autofe.errors import ConfigError
from autofe.tools.profile_script.facts import _Facts
from autofe.tools.profile_script.python_calls import (
    _py_agg,
    _py_argv,
    _py_conf,
    _py_distinct,
    _py_estimator,
    _py_grid,
    _py_group,
    _py_grouped_aggregate,
    _py_order,
    _py_pandas_map,
    _py_parameter,
    _py_partitions,
    _py_rdd,
    _py_register,
    _py_setter,
    _py_union,
    _py_window_spec,
)
from autofe.tools.profile_script.python_context import (
    _AGGREGATES,
    _ML_ESTIMATORS,
    _PANDAS_MAPS,
    _RANKING,
    _RDD_OPS,
    _READ_FORMATS,
    _TEMP_VIEWS,
    _UDF_MAKERS,
    _WRITE_FORMATS,
    _WRITE_TABLES,
    _call_name,
    _callable_name,
    _chain_names,
    _Py,
    _py_text,
    _spark_function,
)
from autofe.tools.profile_script.python_filters import _py_filter
from autofe.tools.profile_script.python_joins import _py_cross_join, _py_join
from autofe.tools.profile_script.python_sources import (
    _df_source,
    _py_delta,
    _py_delta_write,
    _py_read_write,
    _py_select_expr,
    _py_sql,
    _py_sql_expression,
    _py_temp_view,
    _py_write_table,
)


def _profile_python(text: str, facts: _Facts) -> None:
    try:
        tree = ast.parse(text)
    except SyntaxError as err:
        where = f"line {err.lineno}, col {err.offset}"
        raise ConfigError(f"Python could not be parsed: {where}: {err.msg}") from err
    except (RecursionError, MemoryError) as err:  # CPython's parser runs out of stack or levels
        raise ConfigError("Python could not be parsed: code nested too deeply to parse") from err
    except ValueError as err:
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
