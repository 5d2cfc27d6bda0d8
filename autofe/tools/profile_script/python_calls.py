"""The other PySpark calls: grouping, ordering, unions, UDFs, MLlib and job settings."""

from __future__ import annotations

import ast

from autofe.tools.profile_script.python_context import (
    _AGGREGATES,
    _GROUPERS,
    _call_name,
    _callable_name,
    _chain_names,
    _keyword,
    _Py,
    _py_string_arg,
    _py_text,
    _receiver,
)
from autofe.tools.profile_script.python_sources import _df_source


def _py_group(call: ast.Call, ctx: _Py) -> None:
    if "Window" in _chain_names(call):
        return
    width = 0
    for arg in call.args:
        width += len(arg.elts) if isinstance(arg, ast.List | ast.Tuple) else 1
    ctx.facts.group_by_columns += width


def _py_grouped_aggregate(call: ast.Call, ctx: _Py) -> None:
    """``df.groupBy(...).count()`` / ``.sum("x")``: GroupedData shortcuts."""
    receiver = _receiver(call)
    if isinstance(receiver, ast.Call) and _call_name(receiver) in _GROUPERS:
        ctx.facts.aggregations.add(_AGGREGATES[_call_name(call)])


def _py_agg(call: ast.Call, ctx: _Py) -> None:
    """``.agg({"x": "max"})``; Column arguments are seen as function calls."""
    for arg in call.args:
        if isinstance(arg, ast.Dict):
            for value in arg.values:
                name = _py_text(value, ctx) if value is not None else None
                if name in _AGGREGATES:
                    ctx.facts.aggregations.add(_AGGREGATES[name])


def _py_distinct(call: ast.Call, ctx: _Py) -> None:
    ctx.facts.distinct = True


def _py_order(call: ast.Call, ctx: _Py) -> None:
    """``orderBy`` / ``sort`` with columns; a ``Window.orderBy`` only declares a window."""
    if "Window" in _chain_names(call):
        ctx.window_spec = True
    elif call.args:
        ctx.facts.order_by = True


def _py_window_spec(call: ast.Call, ctx: _Py) -> None:
    if "Window" in _chain_names(call):
        ctx.window_spec = True


def _py_union(call: ast.Call, ctx: _Py) -> None:
    """DataFrame unions; ``set.union`` is told apart by sources or the Spark-only names."""
    sources = [_df_source(n, ctx) for n in [_receiver(call), *call.args]]
    if _call_name(call) != "union" or any(s is not None for s in sources):
        ctx.facts.unions += 1


def _py_pandas_map(call: ast.Call, ctx: _Py) -> None:
    function = call.args[0] if call.args else _keyword(call, "func")
    name = _callable_name(function) if function is not None else "?"
    ctx.facts.udfs.add(f"{_call_name(call)}:{name}")


def _py_rdd(call: ast.Call, ctx: _Py) -> None:
    if "rdd" in _chain_names(_receiver(call)):
        ctx.facts.udfs.add(f"rdd.{_call_name(call)}")


def _py_register(call: ast.Call, ctx: _Py) -> None:
    """``spark.udf.register("name", f)`` makes ``name`` callable from SQL."""
    if "udf" in _chain_names(_receiver(call)):
        name = _py_string_arg(call, 0, ("name",), ctx)
        if name is not None:
            ctx.facts.udfs.add(f"udf:{name}")


def _py_estimator(call: ast.Call, name: str, ctx: _Py) -> None:
    """An MLlib estimator; numeric hyper-parameters (``maxIter=10``) go to ``literals``."""
    ctx.facts.ml_estimators[name] = None
    for keyword in call.keywords:
        value = keyword.value.value if isinstance(keyword.value, ast.Constant) else None
        if keyword.arg and isinstance(value, int | float):
            ctx.facts.literal("ml_params", f"{name}.{keyword.arg}={value}")


def _py_setter(call: ast.Call, ctx: _Py) -> None:
    """``lr.setMaxIter(10)`` on a variable bound to an estimator."""
    receiver = _receiver(call)
    name = _call_name(call)
    if not isinstance(receiver, ast.Name) or receiver.id not in ctx.estimators:
        return
    if len(call.args) == 1 and isinstance(call.args[0], ast.Constant):
        param = name[3:4].lower() + name[4:]
        value = call.args[0].value
        ctx.facts.literal("ml_params", f"{ctx.estimators[receiver.id]}.{param}={value!s}")


def _py_grid(call: ast.Call, ctx: _Py) -> None:
    """``ParamGridBuilder().addGrid(lr.regParam, [...])``: each value is one more fit."""
    if len(call.args) == 2 and isinstance(call.args[0], ast.Attribute):
        values = call.args[1]
        count = len(values.elts) if isinstance(values, ast.List | ast.Tuple) else "?"
        ctx.facts.literal("ml_params", f"grid.{call.args[0].attr}={count} values")


def _py_partitions(call: ast.Call, ctx: _Py) -> None:
    if call.args and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, int):
        ctx.facts.literal("partitions", f"{_call_name(call)}={call.args[0].value}")


def _py_conf(call: ast.Call, ctx: _Py) -> None:
    """``spark.conf.set("spark.sql.shuffle.partitions", 400)``: settings that change the plan."""
    if "conf" not in _chain_names(_receiver(call)) or len(call.args) != 2:
        return
    key = _py_string_arg(call, 0, (), ctx)
    value = call.args[1]
    if key is not None and isinstance(value, ast.Constant):
        ctx.facts.literal("spark_conf", f"{key}={value.value!s}")


def _py_parameter(call: ast.Call, name: str, ctx: _Py) -> None:
    """Inputs the job takes: widgets, environment, argparse options, custom conf."""
    if name not in ("get", "getArgument", "getenv", "add_argument") or not call.args:
        return
    dotted = ast.unparse(call.func)
    key = _py_string_arg(call, 0, (), ctx)
    if key is None:
        return
    if dotted.endswith("widgets.get") or name == "getArgument":
        ctx.facts.params.token(f'dbutils.widgets.get("{key}")')
    elif dotted in ("os.environ.get", "os.getenv", "environ.get", "getenv"):
        ctx.facts.params.token(f'os.environ["{key}"]')
    elif name == "add_argument":
        ctx.facts.params.token(key)
    elif dotted.endswith("conf.get") and not key.startswith("spark."):
        ctx.facts.params.token(f'spark.conf.get("{key}")')


def _py_argv(node: ast.Attribute, ctx: _Py) -> None:
    """``sys.argv[1]`` and ``os.environ["X"]`` reads."""
    if not isinstance(node.value, ast.Name):
        return
    if (node.value.id, node.attr) not in (("sys", "argv"), ("os", "environ")):
        return
    parent = ctx.parents.get(id(node))
    used = parent if isinstance(parent, ast.Subscript) and parent.value is node else node
    if isinstance(used, ast.Subscript) or node.attr == "argv":
        ctx.facts.params.token(ast.unparse(used))
