"""What the PySpark reader knows: Spark's names, what the module bound, strings as text."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Literal

from autofe.tools.profile_script.dates import _Ranges
from autofe.tools.profile_script.facts import _Facts

_AGGREGATES = {
    "sum": "sum",
    "avg": "avg",
    "mean": "avg",
    "count": "count",
    "countDistinct": "count_distinct",
    "count_distinct": "count_distinct",
    "approx_count_distinct": "approx_count_distinct",
    "approxCountDistinct": "approx_count_distinct",
    "sumDistinct": "sum_distinct",
    "sum_distinct": "sum_distinct",
    "min": "min",
    "max": "max",
    "first": "first",
    "last": "last",
    "collect_list": "collect_list",
    "collect_set": "collect_set",
    "stddev": "stddev",
    "stddev_samp": "stddev_samp",
    "stddev_pop": "stddev_pop",
    "variance": "variance",
    "var_samp": "var_samp",
    "var_pop": "var_pop",
    "percentile_approx": "percentile_approx",
    "percentile": "percentile",
    "median": "median",
    "mode": "mode",
    "corr": "corr",
    "covar_pop": "covar_pop",
    "covar_samp": "covar_samp",
    "kurtosis": "kurtosis",
    "skewness": "skewness",
    "max_by": "max_by",
    "min_by": "min_by",
    "any_value": "any_value",
    "count_if": "count_if",
    "bool_and": "bool_and",
    "bool_or": "bool_or",
    "product": "product",
    "array_agg": "collect_list",
}
_RANKING = frozenset(
    {"row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile", "lag", "lead"}
    | {"nth_value"}
)
_GROUPERS = frozenset({"groupBy", "groupby", "rollup", "cube", "pivot"})
_READ_FORMATS = frozenset(
    {"table", "parquet", "csv", "json", "orc", "text", "avro", "load", "xml", "delta", "jdbc"}
)
_WRITE_FORMATS = frozenset({"parquet", "csv", "json", "orc", "text", "avro", "save", "xml"})
_WRITE_TABLES = frozenset({"saveAsTable", "insertInto", "toTable", "writeTo"})
_TEMP_VIEWS = frozenset(
    {"createOrReplaceTempView", "createTempView", "createGlobalTempView"}
    | {"createOrReplaceGlobalTempView", "registerTempTable"}
)
_PANDAS_MAPS = frozenset({"mapInPandas", "applyInPandas", "mapInArrow", "applyInArrow"})
_RDD_OPS = frozenset(
    {"map", "flatMap", "mapPartitions", "foreach", "foreachPartition", "reduceByKey"}
    | {"groupByKey", "mapValues", "filter", "aggregateByKey", "combineByKey"}
)
_UDF_MAKERS = frozenset({"udf", "pandas_udf", "vectorized_udf", "udtf"})
_ML_ESTIMATORS = frozenset(
    {
        "LogisticRegression",
        "LinearRegression",
        "GeneralizedLinearRegression",
        "IsotonicRegression",
        "AFTSurvivalRegression",
        "FMClassifier",
        "FMRegressor",
        "DecisionTreeClassifier",
        "DecisionTreeRegressor",
        "RandomForestClassifier",
        "RandomForestRegressor",
        "GBTClassifier",
        "GBTRegressor",
        "NaiveBayes",
        "LinearSVC",
        "MultilayerPerceptronClassifier",
        "OneVsRest",
        "KMeans",
        "BisectingKMeans",
        "GaussianMixture",
        "LDA",
        "PowerIterationClustering",
        "ALS",
        "FPGrowth",
        "PrefixSpan",
        "CrossValidator",
        "TrainValidationSplit",
        "Pipeline",
        "StringIndexer",
        "OneHotEncoder",
        "StandardScaler",
        "MinMaxScaler",
        "MaxAbsScaler",
        "RobustScaler",
        "Imputer",
        "PCA",
        "CountVectorizer",
        "IDF",
        "Word2Vec",
        "ChiSqSelector",
        "UnivariateFeatureSelector",
        "VarianceThresholdSelector",
        "QuantileDiscretizer",
        "VectorIndexer",
        "BucketedRandomProjectionLSH",
        "MinHashLSH",
        "SparkXGBClassifier",
        "SparkXGBRegressor",
        "LightGBMClassifier",
        "LightGBMRegressor",
    }
)


@dataclass
class _Py:
    """What a PySpark module has bound so far, read in source order."""

    facts: _Facts
    parents: dict[int, ast.AST]
    modules: set[str] = field(default_factory=lambda: {"F"})
    functions: dict[str, str] = field(default_factory=dict)
    star_import: bool = False
    strings: dict[str, str] = field(default_factory=dict)
    frames: dict[str, str] = field(default_factory=dict)
    estimators: dict[str, str] = field(default_factory=dict)
    deltas: set[str] = field(default_factory=set)
    sql_tables: dict[int, str] = field(default_factory=dict)
    ranges: dict[int, _Ranges] = field(default_factory=dict)
    window_spec: bool = False


def _call_name(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _receiver(call: ast.Call) -> ast.expr | None:
    return call.func.value if isinstance(call.func, ast.Attribute) else None


def _spark_function(call: ast.Call, ctx: _Py) -> str | None:
    """The ``pyspark.sql.functions`` function a call invokes (``F.sum``, imported ``col``)."""
    func = call.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return func.attr if func.value.id in ctx.modules else None
    if isinstance(func, ast.Name):
        if func.id in ctx.functions:
            return ctx.functions[func.id]
        known = func.id in _AGGREGATES or func.id in _RANKING or func.id in ("col", "lit")
        return func.id if ctx.star_import and known else None
    return None


def _chain_names(node: ast.AST | None) -> list[str]:
    """Attribute and call names down a method chain, outermost first.

    >>> _chain_names(ast.parse("spark.read.format('x').load('p')").body[0].value)
    ['load', 'format', 'read', 'spark']
    """
    names = []
    while node is not None:
        if isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, ast.Attribute):
            names.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Subscript):
            node = node.value
        else:
            names.append(node.id if isinstance(node, ast.Name) else "")
            node = None
    return names


def _io_direction(call: ast.Call) -> Literal["read", "write"] | None:
    """Whether a ``.parquet(...)``-style call reads or writes: the nearest read/write wins."""
    for name in _chain_names(call)[1:]:
        if name in ("read", "readStream"):
            return "read"
        if name in ("write", "writeStream", "writeTo"):
            return "write"
    return None


def _callable_name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return "lambda" if isinstance(node, ast.Lambda) else ast.unparse(node)


def _py_text(node: ast.AST, ctx: _Py) -> str | None:
    """A string expression's text, f-string holes and ``{}``/``%s`` slots as parameter tokens.

    Holes naming a variable bound to a plain string are filled in (``f"FROM {table}"``).
    """
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(_py_hole(part, ctx) for part in node.values)
    if isinstance(node, ast.Name):
        return ctx.strings.get(node.id)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _py_text(node.left, ctx), _py_text(node.right, ctx)
        return left + right if left is not None and right is not None else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        template = _py_text(node.left, ctx)
        slot = re.compile(r"%(?:\((\w+)\))?[sdifr]")
        return slot.sub(lambda m: _slot(m[1] or "%s", ctx), template) if template else None
    if isinstance(node, ast.Call):
        return _py_text_call(node, ctx)
    return None


def _py_text_call(call: ast.Call, ctx: _Py) -> str | None:
    name = _call_name(call)
    receiver = _receiver(call)
    if name == "format" and receiver is not None:
        template = _py_text(receiver, ctx)
        values = {k.arg: _py_text(k.value, ctx) for k in call.keywords if k.arg}

        def fill(match: re.Match[str]) -> str:
            return values.get(match[1]) or _slot(match[1] or "{}", ctx)

        return re.sub(r"\{(\w*)[^{}]*\}", fill, template) if template is not None else None
    if name in ("strip", "lstrip", "rstrip", "lower", "upper") and receiver is not None:
        return _py_text(receiver, ctx)
    if name == "dedent" and call.args:
        return _py_text(call.args[0], ctx)
    return None


def _slot(name: str, ctx: _Py) -> str:
    display = name if name.startswith(("{", "%")) else "{" + name + "}"
    return ctx.facts.params.token(display, parameter=False)


def _py_hole(part: ast.expr, ctx: _Py) -> str:
    if isinstance(part, ast.Constant):
        return str(part.value)
    if isinstance(part, ast.FormattedValue):
        value = part.value
        if isinstance(value, ast.Name) and value.id in ctx.strings:
            return ctx.strings[value.id]
        return _slot(ast.unparse(value), ctx)
    return ""


def _display(text: str, ctx: _Py) -> str:
    return ctx.facts.params.restore(text)


def _py_string_arg(call: ast.Call, index: int, keywords: tuple[str, ...], ctx: _Py) -> str | None:
    """Argument ``index`` (or a keyword) as text, variables and f-strings resolved."""
    node: ast.expr | None = call.args[index] if len(call.args) > index else None
    for keyword in call.keywords:
        if keyword.arg in keywords:
            node = keyword.value
    if node is None:
        return None
    text = _py_text(node, ctx)
    if text is None and isinstance(node, ast.Name):
        return "{" + node.id + "}"
    return _display(text, ctx) if text is not None else None


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)
