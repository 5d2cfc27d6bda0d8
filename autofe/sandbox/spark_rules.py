"""Which DuckDB constructs have a Spark form that computes the same values, and what that form is.

The rules are an allow-list keyed by sqlglot node type (and, for functions sqlglot does not
model, by name). A node with no entry is refused: a construct is only translated once its
Spark form is known to agree with DuckDB, including NULLs, division by zero, rounding, regular
expression dialect and list indexing. Each rule either returns the node unchanged (the two
engines agree and sqlglot prints it correctly), returns a rewritten node, or raises
:class:`~autofe.errors.Untranspilable` naming the construct and the difference.

Rules run bottom-up on a tree annotated by :mod:`autofe.sandbox.duck_types`; a rewritten node
keeps the DuckDB type of the node it replaces, so parents still see DuckDB's types. The
evidence for every rule is ``tests/pipelines/test_spark.py`` (``fixtures/spark_semantics``): each
rewritten expression runs on Spark against DuckDB's answer for edge-case inputs.

Spark is assumed to run with the settings :data:`PINNED_SPARK_CONF` (ANSI mode, UTC, ...), which
``autofe.pipelines.spark`` enforces.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import NoReturn

from sqlglot import exp

from autofe.errors import Untranspilable
from autofe.sandbox.duck_types import NUMERIC, integer_range_type, json_wildcard, kind
from autofe.sandbox.regex_dialect import JavaRegex, re2_to_java

Rule = Callable[[exp.Expr], exp.Expr]

PINNED_SPARK_CONF: dict[str, str] = {
    # errors where DuckDB errors (overflow, bad casts), NULL-safe size(), strict typing
    "spark.sql.ansi.enabled": "true",
    "spark.sql.legacy.sizeOfNull": "false",
    # the warehouse's timestamps are naive UTC, like DuckDB's TIMESTAMP
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.timestampType": "TIMESTAMP_NTZ",
    "spark.sql.parquet.inferTimestampNTZ.enabled": "true",
    # string literals are unescaped the way sqlglot writes them
    "spark.sql.parser.escapedStringLiterals": "false",
    "spark.sql.caseSensitive": "false",
    # the sandbox: a feature reads the registered warehouse tables, never a file path
    "spark.sql.runSQLOnFiles": "false",
}
"""Spark settings the rules assume; a different value would change what a query computes."""

DOUBLE = exp.DataType.build("DOUBLE")
BIGINT = exp.DataType.build("BIGINT")
TIMESTAMP = exp.DataType.build("TIMESTAMP")
DATE = exp.DataType.build("DATE")
STRING_LIST = exp.DataType.build("ARRAY<STRING>", dialect="spark")
WORD_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def refuse(node: exp.Expr, why: str) -> NoReturn:
    """Raise :class:`Untranspilable` naming the construct (as DuckDB SQL) and the difference."""
    text = node.sql("duckdb")
    shown = text if len(text) <= 80 else text[:77] + "..."
    raise Untranspilable(f"{shown}: {why}")


def fn(name: str, *args: exp.Expr) -> exp.Anonymous:
    """A Spark function call printed exactly as named (sqlglot does not reinterpret it)."""
    return exp.Anonymous(this=name, expressions=list(args))


def cast(node: exp.Expr, to: exp.DataType) -> exp.Cast:
    return exp.Cast(this=node.copy(), to=to.copy())


def need(node: exp.Expr, families: frozenset[str] | set[str], what: str) -> str:
    """The type family of ``node``, which must be one of ``families``."""
    found = kind(node)
    if found == "unknown":
        refuse(node, f"cannot tell the type of {what}, and the translation depends on it")
    if found not in families:
        refuse(node, f"{what} of type {found} is not translated")
    return found


def literal_text(node: exp.Expr, what: str) -> str:
    if not (isinstance(node, exp.Literal) and node.is_string):
        refuse(node, f"{what} must be a string literal to be translated")
    return str(node.this)


def literal_int(node: exp.Expr | None, what: str) -> int:
    value = node.to_py() if isinstance(node, exp.Literal | exp.Neg) else None
    if not isinstance(value, int) or isinstance(value, bool):
        refuse(node or exp.null(), f"{what} must be an integer literal to be translated")
    return value


def keep(node: exp.Expr) -> exp.Expr:
    """Same meaning in both engines, and sqlglot prints it the way Spark reads it."""
    return node


# ------------------------------------------------------------------ query structure


def _join(node: exp.Expr) -> exp.Expr:
    if str(node.args.get("method") or "").upper() == "ASOF":
        return node  # rewritten as a whole by autofe.sandbox.asof_joins once the rules ran
    if node.args.get("method") or (node.args.get("kind") or "") not in (
        "",
        "INNER",
        "OUTER",
        "CROSS",
    ):
        refuse(node, "only inner, outer and cross joins are translated")
    return node


def _select(node: exp.Expr) -> exp.Expr:
    distinct = node.args.get("distinct")
    if isinstance(distinct, exp.Distinct) and distinct.args.get("on"):
        refuse(node, "DISTINCT ON has no Spark form")
    if node.args.get("qualify"):
        refuse(node, "QUALIFY is not translated")
    return node


def _star(node: exp.Expr) -> exp.Expr:
    if any(node.args.get(k) for k in ("except_", "except", "replace", "rename")):
        refuse(node, "* EXCLUDE / REPLACE / RENAME is not translated")
    return node


def _group(node: exp.Expr) -> exp.Expr:
    if any(node.args.get(k) for k in ("all", "rollup", "cube", "grouping_sets", "totals")):
        refuse(node, "GROUP BY ALL / ROLLUP / CUBE / GROUPING SETS are not translated")
    return node


def _range(node: exp.Expr) -> exp.Expr:
    """DuckDB's ``range(n) AS t(j)``: BIGINTs 0 .. n-1 in a column named ``range``; Spark's
    ``range(n)`` is the same rows in a column named ``id``, so the alias must name it."""
    table = node.parent
    alias = table.args.get("alias") if isinstance(table, exp.Table) else None
    if not (isinstance(table, exp.Table) and integer_range_type(table)):
        refuse(node, "only range(n) or range(a, b) over integer literals, in FROM, is translated")
    if not (isinstance(alias, exp.TableAlias) and len(alias.columns) == 1):
        refuse(node, "range(...) must name its column (AS t(j)): DuckDB's is range, Spark's id")
    return fn("range", node.args["start"], node.args["end"])


def _unnest(node: exp.Expr) -> exp.Expr:
    """DuckDB's ``unnest(list) AS x`` in a select list: a row per element (a NULL element
    gives a NULL), none for a NULL or empty list, the other select expressions repeated;
    Spark's ``explode`` the same. Spark allows one generator per select and none inside an
    expression, and DuckDB's order against aggregates and windows is not Spark's: refused."""
    select = node.parent.parent if isinstance(node.parent, exp.Alias) else None
    if node.expressions or not isinstance(select, exp.Select) or node.parent not in select.selects:
        refuse(node, "only one-argument unnest(list) AS name, as a select item, is translated")
    need(node.this, {"list"}, "the argument")
    own = [n for n in select.find_all(exp.Explode, exp.AggFunc, exp.Window) if _owner(n) is select]
    if len(own) > 1 or any(select.args.get(k) for k in ("group", "having", "qualify")):
        refuse(node, "unnest beside another unnest, an aggregate or a window is not translated")
    return node


def _owner(node: exp.Expr) -> exp.Expr | None:
    return node.find_ancestor(exp.Select)


def _with(node: exp.Expr) -> exp.Expr:
    if node.args.get("recursive"):
        refuse(node, "recursive CTEs are not translated")
    return node


def _cte(node: exp.Expr) -> exp.Expr:
    node.set("materialized", None)  # a planner hint in DuckDB, a syntax error in Spark
    return node


def _union(node: exp.Expr) -> exp.Expr:
    if node.args.get("by_name"):
        refuse(node, "UNION BY NAME is not translated")
    return node


def _window_spec(node: exp.Expr) -> exp.Expr:
    bounded = {"UNBOUNDED", "CURRENT ROW", None}
    if node.args.get("kind") == "RANGE" and not {node.args.get("start"), node.args.get("end")} <= (
        bounded
    ):
        refuse(node, "RANGE frames with offsets are not translated (ROWS frames are)")
    return node


# ------------------------------------------------------------------ comparisons and logic

_COMPARABLE = (NUMERIC, {"text"}, {"date", "timestamp"}, {"boolean"})


def _comparable(node: exp.Expr, left: exp.Expr, right: exp.Expr) -> None:
    """DuckDB and Spark coerce mixed types differently: both sides must be of one family."""
    kinds = {kind(side) for side in (left, right) if not isinstance(side, exp.Null)} - {"null"}
    iso = [s for s in (left, right) if isinstance(s, exp.Literal) and s.is_string]
    if iso and kinds <= {"text", "date", "timestamp"}:
        kinds -= {"text"}  # an ISO literal compared with a date or time: both engines cast it
    if "unknown" in kinds:
        refuse(node, "cannot tell the operand types, and mixed-type comparison differs")
    if kinds and not any(kinds <= family for family in _COMPARABLE):
        refuse(node, f"comparing {' and '.join(sorted(kinds))} coerces differently in Spark")


def _compare(node: exp.Expr) -> exp.Expr:
    _comparable(node, node.this, node.expression)
    return node


def _between(node: exp.Expr) -> exp.Expr:
    """``x BETWEEN a AND b``: both ends included in both engines."""
    for bound in (node.args["low"], node.args["high"]):
        _comparable(node, node.this, bound)
    return node


def _values(node: exp.Expr) -> exp.Expr:
    """An inline table, ``(VALUES (0), (1)) AS t(c)``: Spark's ``VALUES ... AS t(c)``. Only
    integer or string literals, one kind per column: DuckDB types ``1.5`` DECIMAL(2,1) and
    Spark DECIMAL(2,1) too, but a column mixing kinds is coerced by different rules."""
    alias = node.args.get("alias")
    columns = alias.columns if isinstance(alias, exp.TableAlias) else []
    if not columns:
        refuse(node, "VALUES must name its columns (AS t(c, ...)) to be translated")
    kinds: list[set[bool]] = [set() for _ in columns]
    for row in node.expressions:
        items = row.expressions if isinstance(row, exp.Tuple) else [row]
        if len(items) != len(columns):
            refuse(node, "every VALUES row must have one value per named column")
        for seen, item in zip(kinds, items, strict=True):
            if not (isinstance(item, exp.Literal) and (item.is_string or item.is_int)):
                refuse(node, "only integer and string literals in VALUES are translated")
            seen.add(item.is_string)
    if any(len(seen) > 1 for seen in kinds):
        refuse(node, "a VALUES column mixing integers and strings is coerced differently")
    return node


def _in(node: exp.Expr) -> exp.Expr:
    for item in node.expressions:
        _comparable(node, node.this, item)
    return node


# ------------------------------------------------------------------ arithmetic


def _numeric_binary(node: exp.Expr) -> exp.Expr:
    need(node.this, NUMERIC, "an operand")
    need(node.expression, NUMERIC, "an operand")
    return node


def _add_sub(node: exp.Expr) -> exp.Expr:
    left, right = kind(node.this), kind(node.expression)
    if {left, right} <= NUMERIC:
        return node
    if left == "date" and right == "interval":  # DuckDB: date ± interval is a TIMESTAMP
        node.set("this", cast(node.this, TIMESTAMP))
        return node
    if (left, right) in (("timestamp", "interval"), ("date", "integer")):
        return node
    if isinstance(node, exp.Add) and (left, right) == ("interval", "timestamp"):
        return node
    if isinstance(node, exp.Sub) and (left, right) == ("date", "date"):
        return fn("datediff", node.this, node.expression)  # DuckDB: days as BIGINT
    if isinstance(node, exp.Sub) and left == right == "timestamp" and _under_epoch(node):
        return node
    refuse(node, f"{left} {'+' if isinstance(node, exp.Add) else '-'} {right} is not translated")


def _under_epoch(node: exp.Expr) -> bool:
    parent = node.parent
    while isinstance(parent, exp.Paren):
        parent = parent.parent
    return isinstance(parent, exp.TimeToUnix)


def _nonzero(node: exp.Expr) -> bool:
    """Provably non-zero divisors, so the division needs no zero guard."""
    if isinstance(node, exp.Paren):
        return _nonzero(node.this)
    if isinstance(node, exp.Literal) and not node.is_string:
        return float(node.this) != 0
    if isinstance(node, exp.Nullif):
        zero = node.expression
        return isinstance(zero, exp.Literal) and not zero.is_string and float(zero.this) == 0
    if isinstance(node, exp.Greatest):
        return any(_positive(e) for e in (node.this, *node.expressions))
    return False


def _positive(node: exp.Expr) -> bool:
    return isinstance(node, exp.Literal) and not node.is_string and float(node.this) > 0


def _div(node: exp.Expr) -> exp.Expr:
    """DuckDB divides as DOUBLE with IEEE results for a zero divisor (inf, -inf, NaN); Spark's
    ANSI division fails on zero and divides decimals at a limited scale. ``power(0, -1)`` is
    IEEE infinity with the divisor's sign, so ``n * power(d, -1)`` gives DuckDB's answer."""
    need(node.this, NUMERIC, "a dividend")
    need(node.expression, NUMERIC, "a divisor")
    num, den = cast(node.this, DOUBLE), cast(node.expression, DOUBLE)
    quotient = exp.Div(this=num, expression=den)
    if _nonzero(node.expression):
        return exp.Paren(this=quotient)
    ieee = exp.Mul(this=num.copy(), expression=fn("power", den.copy(), exp.Literal.number(-1)))
    zero = exp.EQ(this=den.copy(), expression=exp.Literal.number(0))
    return exp.Case(ifs=[exp.If(this=zero, true=ieee)], default=quotient)


def _int_div(node: exp.Expr) -> exp.Expr:
    need(node.this, {"integer"}, "an operand of //")
    need(node.expression, {"integer"}, "an operand of //")
    return node


def _unary_numeric(node: exp.Expr) -> exp.Expr:
    need(node.this, NUMERIC, "the argument")
    return node


def _round(node: exp.Expr) -> exp.Expr:
    """Both round half away from zero at 0 digits; at other digits DuckDB scales a DOUBLE by a
    power of ten first, which can round a different way than Spark's exact decimal."""
    family = need(node.this, NUMERIC, "the argument")
    digits = node.args.get("decimals")
    if digits is not None and literal_int(digits, "round's digits") != 0 and family == "float":
        refuse(node, "round(DOUBLE, n) with n != 0 can round differently in Spark")
    return node


def _ceil_floor(node: exp.Expr) -> exp.Expr:
    """Spark's ceil/floor of a DOUBLE is a BIGINT and overflows past 2^63 (and on inf/NaN);
    DuckDB keeps a DOUBLE. Every DOUBLE at or past 2^52 is already whole, so it passes as is."""
    family = need(node.this, NUMERIC, "the argument")
    if family != "float" or node.args.get("decimals") is not None:
        return node
    x = node.this
    whole = exp.GTE(this=fn("abs", x.copy()), expression=exp.Literal.number(2**52))
    unchanged = exp.Or(this=fn("isnan", x.copy()), expression=whole)
    name = "ceil" if isinstance(node, exp.Ceil) else "floor"
    rounded = cast(fn(name, x.copy()), DOUBLE)
    return exp.Case(ifs=[exp.If(this=unchanged, true=x.copy())], default=rounded)


def _log(node: exp.Expr) -> exp.Expr:
    """DuckDB's one-argument ``log`` is base 10 (Spark's is natural)."""
    if node.expression is None:
        need(node.this, NUMERIC, "the argument")
        return fn("log10", node.this)
    return fn("log", node.this, node.expression)


# ------------------------------------------------------------------ aggregates


def _avg(node: exp.Expr) -> exp.Expr:
    """DuckDB averages DECIMAL as DOUBLE; Spark keeps a DECIMAL rounded to scale + 4."""
    if need(node.this, NUMERIC, "the argument") == "decimal":
        node.set("this", cast(node.this, DOUBLE))
    return node


def _median(node: exp.Expr) -> exp.Expr:
    """DuckDB's median of DECIMAL rounds to the input's scale; of numbers it interpolates, as
    Spark's exact ``median`` does. Spark's ``median`` takes no ORDER BY or frame in a window;
    ``percentile(x, 0.5)``, the same exact interpolation, does."""
    need(node.this, {"integer", "float"}, "median's argument")
    if _windowed(node):
        return fn("percentile", node.this, exp.Literal.number("0.5"))
    return fn("median", node.this)


def _windowed(node: exp.Expr) -> bool:
    parent = node.parent
    while isinstance(parent, exp.Filter | exp.IgnoreNulls):
        parent = parent.parent
    return isinstance(parent, exp.Window)


def _quantile(node: exp.Expr) -> exp.Expr:
    need(node.this, {"integer", "float"}, "the quantile's argument")
    share = node.expression
    if not (isinstance(share, exp.Literal) and not share.is_string):
        refuse(node, "the quantile must be one numeric literal")
    return fn("percentile", node.this, share)


def _arg_max_min(node: exp.Expr) -> exp.Expr:
    """DuckDB's arg_max skips rows whose argument is NULL; Spark's max_by would return it."""
    if node.args.get("count") is not None:
        refuse(node, "arg_max/arg_min with a count is not translated")
    arg, key = node.this, node.expression
    key_if_arg = exp.Case(
        ifs=[exp.If(this=exp.Not(this=exp.Is(this=arg.copy(), expression=exp.null())), true=key)]
    )
    name = "max_by" if isinstance(node, exp.ArgMax) else "min_by"
    return fn(name, arg, key_if_arg)


def _sum(node: exp.Expr) -> exp.Expr:
    need(node.this, NUMERIC, "sum's argument")
    return node


def _variance(node: exp.Expr) -> exp.Expr:
    need(node.this, {"integer", "float"}, "the argument")
    return node


# ------------------------------------------------------------------ casts


def _cast(node: exp.Expr) -> exp.Expr:
    target = node.args["to"]
    if isinstance(node.this, exp.JSONExtract):
        return _json_list(node, target)
    family = kind(node.this)
    if family == "null" or isinstance(node.this, exp.Null):
        return node
    if family == "unknown":
        refuse(node, "cannot tell the type of the cast value, and casts differ by type")
    for types, rule in _CASTS:
        if target.this in types:
            return rule(node, family)
    refuse(node, f"a cast to {target.sql('duckdb')} is not translated")


def _to_double(node: exp.Expr, family: str) -> exp.Expr:
    if family in NUMERIC | {"boolean"}:
        return node
    if family in ("text", "json"):
        return _text_to_double(node)
    refuse(node, f"a cast from {family} to DOUBLE is not translated")


DUCKDB_NUMBER = (
    r"^[ \t\n\r]*[+-]?(?:(?:[0-9]+(?:_[0-9]+)*(?:\.(?:[0-9]+(?:_[0-9]+)*)?)?|\.[0-9]+(?:_[0-9]+)*)"
    r"(?:[eE][+-]?[0-9]+)?|(?i:inf|infinity|nan))[ \t\n\r]*$"
)
"""Text DuckDB reads as a DOUBLE: digits with ``_`` separators, ``.5``, ``5.``, exponents,
inf/infinity/nan, surrounded by blanks. Spark's parser accepts other forms (``1.5d``, ``1.5f``)
and not the separators, so text outside this is NULL (TRY_CAST) or an error (CAST)."""


def _text_to_double(node: exp.Expr) -> exp.Expr:
    text = node.this
    matches = exp.RegexpLike(this=text.copy(), expression=exp.Literal.string(DUCKDB_NUMBER))
    cleaned = fn(
        "regexp_replace", text.copy(), exp.Literal.string("[_ \\t\\n\\r]"), exp.Literal.string("")
    )
    parsed = exp.Cast(this=cleaned, to=DOUBLE.copy())
    otherwise = (
        None
        if isinstance(node, exp.TryCast)
        else _fail("DuckDB fails to cast text that is not a number")
    )
    return exp.Case(ifs=[exp.If(this=matches, true=parsed)], default=otherwise)


def _fail(why: str) -> exp.Expr:
    """Fail the Spark query where it cannot give DuckDB's answer: reported, never a wrong value."""
    return fn("raise_error", exp.Literal.string(f"autofe: {why}"))


def _to_integer(node: exp.Expr, family: str) -> exp.Expr:
    """DuckDB rounds a DOUBLE half to even and a DECIMAL half away from zero; Spark truncates."""
    if family in ("integer", "boolean"):
        return node
    if family in ("float", "decimal"):
        rounded = fn("bround" if family == "float" else "round", node.this, exp.Literal.number(0))
        node.set("this", rounded)
        return node
    refuse(node, f"a cast from {family} to an integer is not translated (DuckDB rounds '1.5')")


def _to_text(node: exp.Expr, family: str) -> exp.Expr:
    if family in ("text", "json", "integer", "boolean", "date"):
        return node
    if family == "float":
        return _double_text(node.this)
    refuse(node, f"{family} values print differently in Spark")


def _double_text(x: exp.Expr) -> exp.Expr:
    """DuckDB prints a DOUBLE as Python's repr does; Java's toString differs (1e+20 vs 1.0E20,
    0.001 vs 0.0010 on some JDKs). Whole numbers under 1e16 print as digits and '.0' in DuckDB,
    which Spark can spell exactly; any other value fails the query instead of differing."""
    whole = exp.TryCast(this=x.copy(), to=BIGINT.copy(), safe=True)
    is_whole = exp.And(
        this=exp.LT(this=fn("abs", x.copy()), expression=exp.Literal.number("1e16")),
        expression=exp.EQ(this=x.copy(), expression=cast(whole, DOUBLE)),
    )
    text = exp.DataType.build("VARCHAR")
    digits = fn("concat", cast(whole, text), exp.Literal.string(".0"))
    zero = exp.EQ(this=x.copy(), expression=exp.Literal.number(0))
    ifs = [
        exp.If(this=exp.Is(this=x.copy(), expression=exp.null()), true=exp.null()),
        exp.If(this=zero, true=cast(x, text)),  # '0.0' and '-0.0' in both
        exp.If(this=is_whole, true=digits),
    ]
    return exp.Case(
        ifs=ifs, default=_fail("a DOUBLE that is not a whole number under 1e16 prints differently")
    )


PLAIN_DATE = r"^ *[0-9]{4}-[0-9]{1,2}-[0-9]{1,2} *$"
MAYBE_DATE = r"(?i)^[ \t\n\r\x0B\f]*(?:[+-]?[0-9]|[+-]?infinity|epoch)"
"""Text DuckDB may read as a date in a form outside :data:`PLAIN_DATE` (times, slashes, BC,
``infinity``): rather than guess, the Spark query fails on it."""


def _to_date(node: exp.Expr, family: str) -> exp.Expr:
    if family in ("date", "timestamp"):
        return node
    if family != "text":
        refuse(node, f"a cast from {family} to DATE is not translated")
    text = node.this
    plain = exp.RegexpLike(this=text.copy(), expression=exp.Literal.string(PLAIN_DATE))
    maybe = exp.RegexpLike(this=text.copy(), expression=exp.Literal.string(MAYBE_DATE))
    strict = not isinstance(node, exp.TryCast)
    # safe=True: without it sqlglot prints a TryCast as a plain (failing) CAST
    parsed = exp.Cast(this=fn("trim", text.copy()), to=DATE.copy())
    if not strict:
        parsed = exp.TryCast(this=fn("trim", text.copy()), to=DATE.copy(), safe=True)
    other = _fail("date text in a form only DuckDB reads (times, slashes, BC, infinity)")
    ifs = [exp.If(this=plain, true=parsed), exp.If(this=maybe, true=other)]
    failed = _fail("DuckDB fails to cast text that is not a date")
    return exp.Case(ifs=ifs, default=None if isinstance(node, exp.TryCast) else failed)


def _to_timestamp(node: exp.Expr, family: str) -> exp.Expr:
    if family in ("date", "timestamp"):
        return node
    refuse(node, f"a cast from {family} to TIMESTAMP is not translated")


def _to_boolean(node: exp.Expr, family: str) -> exp.Expr:
    if family in ("integer", "boolean"):
        return node
    refuse(node, f"a cast from {family} to BOOLEAN is not translated")


_CASTS: tuple[tuple[frozenset[exp.DType], Callable[[exp.Expr, str], exp.Expr]], ...] = (
    (frozenset({exp.DType.DOUBLE}), _to_double),
    (frozenset({exp.DType.BIGINT, exp.DType.INT}), _to_integer),
    (frozenset(exp.DataType.TEXT_TYPES), _to_text),
    (frozenset({exp.DType.DATE}), _to_date),
    (frozenset({exp.DType.TIMESTAMP}), _to_timestamp),
    (frozenset({exp.DType.BOOLEAN}), _to_boolean),
)


# ------------------------------------------------------------------ JSON


def spark_json_path(node: exp.Expr, path: exp.Expr) -> str:
    """A DuckDB JSON path as Spark's ``get_json_object`` reads it.

    >>> import sqlglot
    >>> path = sqlglot.parse_one("j ->> '$.\\"a.b\\"[0].c'", "duckdb").expression
    >>> spark_json_path(exp.null(), path)
    "$['a.b'][0].c"
    """
    parts = path.expressions if isinstance(path, exp.JSONPath) else []
    if not parts or not isinstance(parts[0], exp.JSONPathRoot):
        refuse(node, "the JSON path must be a literal path from $")
    out = "$"
    for part in parts[1:]:
        key = part.this
        if isinstance(part, exp.JSONPathKey) and isinstance(key, str):
            if "'" in key or "]" in key:
                refuse(node, "a JSON key with ' or ] cannot be written as a Spark path")
            out += f".{key}" if WORD_RE.match(key) else f"['{key}']"
        elif isinstance(part, exp.JSONPathSubscript) and isinstance(key, int) and key >= 0:
            out += f"[{key}]"
        else:
            refuse(node, "JSON wildcards and negative indexes return lists in DuckDB")
    return out


def _json_scalar(node: exp.Expr) -> exp.Expr:
    """``->>``: both engines print scalars the same way (numbers re-serialised, strings
    unquoted) and objects as compact JSON; on text that is not JSON DuckDB fails and Spark
    returns NULL, so only JSON-typed values are accepted.

    A path ending in ``[*]`` is DuckDB's list of the array's elements as strings: Spark reads
    the array with ``from_json`` as ``array<string>``, which prints its elements the same way.
    Where the path is missing or not an array DuckDB gives an empty list and Spark NULL, so
    Spark's is coalesced to an empty list."""
    need(node.this, {"json"}, "the JSON value")
    if json_wildcard(node):
        parts = node.expression.expressions
        path = spark_json_path(node, exp.JSONPath(expressions=parts[:-1]))
        text = fn("get_json_object", node.this, exp.Literal.string(path))
        listed = fn("from_json", text, exp.Literal.string("array<string>"))
        return fn("coalesce", listed, cast(fn("array"), STRING_LIST))
    path = spark_json_path(node, node.expression)
    return fn("get_json_object", node.this, exp.Literal.string(path))


def _json_extract(node: exp.Expr) -> exp.Expr:
    parent = node.parent
    if isinstance(parent, exp.Cast) and parent.args["to"].is_type("array"):
        return node  # translated with its cast to VARCHAR[] (see _json_list)
    refuse(node, "-> returns JSON text that Spark's get_json_object unquotes for strings")


def _json_list(node: exp.Expr, target: exp.DataType) -> exp.Expr:
    """``CAST(j -> path AS VARCHAR[])``: a JSON array of scalars as strings in both engines."""
    element = target.expressions[0] if target.expressions else None
    if not (isinstance(element, exp.DataType) and element.this in exp.DataType.TEXT_TYPES):
        refuse(node, "only a cast of a JSON array to VARCHAR[] is translated")
    extract = node.this
    need(extract.this, {"json"}, "the JSON value")
    text = fn(
        "get_json_object",
        extract.this,
        exp.Literal.string(spark_json_path(node, extract.expression)),
    )
    return fn("from_json", text, exp.Literal.string("array<string>"))


# ------------------------------------------------------------------ text


def _lower(node: exp.Expr) -> exp.Expr:
    """Java lower-cases 'İ' to 'i̇' and a final 'Σ' to 'ς'; DuckDB maps them to 'i' and 'σ'."""
    need(node.this, {"text", "json"}, "the argument")
    special = fn("translate", node.this, exp.Literal.string("İΣ"), exp.Literal.string("iσ"))
    return fn("lower", special)


def _trim(node: exp.Expr) -> exp.Expr:
    if node.expression is not None or node.args.get("position"):
        refuse(node, "trim with characters or a side is not translated")
    need(node.this, {"text", "json"}, "the argument")
    return node


def _length(node: exp.Expr) -> exp.Expr:
    family = need(node.this, {"text", "list"}, "the argument")
    return fn("size" if family == "list" else "length", node.this)


def _text_args(node: exp.Expr) -> exp.Expr:
    for arg in (node.this, node.expression):
        need(arg, {"text", "json"}, "an argument")
    return node


def _concat(node: exp.Expr) -> exp.Expr:
    """DuckDB's concat() skips NULLs, as Spark's concat_ws('') does; ``||`` is NULL-strict in
    both."""
    for arg in node.expressions:
        need(arg, {"text"}, "an argument of concat")
    return fn("concat_ws", exp.Literal.string(""), *node.expressions)


def _dpipe(node: exp.Expr) -> exp.Expr:
    need(node.this, {"text"}, "an operand of ||")
    need(node.expression, {"text"}, "an operand of ||")
    return node


def _replace(node: exp.Expr) -> exp.Expr:
    if not literal_text(node.expression, "the searched text"):
        refuse(node, "replacing the empty string differs")
    return node


def _substring(node: exp.Expr) -> exp.Expr:
    """1-based in both from a positive start; negative starts and lengths differ."""
    need(node.this, {"text"}, "the text")
    if literal_int(node.args.get("start"), "the start") < 1:
        refuse(node, "a start before 1 differs")
    length = node.args.get("length")
    if length is not None and literal_int(length, "the length") < 0:
        refuse(node, "a negative length differs")
    return node


def _split_part(node: exp.Expr) -> exp.Expr:
    """Spark fails on part 0 and an empty delimiter; DuckDB returns ''."""
    if not literal_text(node.args["delimiter"], "the delimiter"):
        refuse(node, "an empty delimiter differs")
    if literal_int(node.args["part_index"], "the part") == 0:
        refuse(node, "part 0 fails in Spark")
    return fn("split_part", node.this, node.args["delimiter"], node.args["part_index"])


def _split(node: exp.Expr) -> exp.Expr:
    """Spark's split takes a regular expression: the separator is quoted character by character."""
    separator = literal_text(node.expression, "the separator")
    if not separator:
        refuse(node, "splitting on the empty string differs")
    quoted = "".join(c if c.isalnum() else "\\" + c for c in separator)
    return fn("split", node.this, exp.Literal.string(quoted), exp.Literal.number(-1))


def _like(node: exp.Expr) -> exp.Expr:
    """DuckDB's LIKE has no escape character; Spark's default one is the backslash."""
    pattern = literal_text(node.expression, "the LIKE pattern")
    need(node.this, {"text", "json"}, "the matched value")
    node.set("expression", exp.Literal.string(pattern.replace("\\", "\\\\")))
    return node


# ------------------------------------------------------------------ regular expressions


def _regex(node: exp.Expr, pattern: exp.Expr, options: exp.Expr | None = None) -> JavaRegex:
    text = literal_text(pattern, "the regular expression")
    flags = literal_text(options, "the regular expression options") if options else ""
    need(node.this, {"text", "json"}, "the matched value")
    return re2_to_java(text, flags)


def _group_index(node: exp.Expr, regex: JavaRegex, group: exp.Expr | None) -> int:
    index = 0 if group is None else literal_int(group, "the group")
    if not 0 <= index <= regex.groups:
        refuse(node, f"group {index} of a pattern with {regex.groups} groups")
    return index


def _regexp_like(node: exp.Expr) -> exp.Expr:
    regex = _regex(node, node.expression, node.args.get("flag"))
    return exp.RegexpLike(this=node.this, expression=exp.Literal.string(regex.pattern))


def _regexp_full_match(node: exp.Expr) -> exp.Expr:
    regex = _regex(node, node.expression, node.args.get("options"))
    whole = regex.flags + "\\A(?:" + regex.body + ")\\z"
    return exp.RegexpLike(this=node.this, expression=exp.Literal.string(whole))


def _regexp_extract(node: exp.Expr) -> exp.Expr:
    """Both return '' when nothing matches or the group did not take part; Spark's default
    group is 1, DuckDB's 0, so the group is always written out."""
    regex = _regex(node, node.expression, node.args.get("parameters"))
    group = _group_index(node, regex, node.args.get("group"))
    return fn(
        "regexp_extract", node.this, exp.Literal.string(regex.pattern), exp.Literal.number(group)
    )


def _regexp_extract_all(node: exp.Expr) -> exp.Expr:
    """Engines resume differently after an empty match, and a group that did not take part is
    NULL in DuckDB but '' in Spark: both cases are refused."""
    regex = _regex(node, node.expression, node.args.get("parameters"))
    group = _group_index(node, regex, node.args.get("group"))
    if regex.matches_empty:
        refuse(node, "a pattern that can match the empty string")
    if group in regex.optional_groups:
        refuse(node, f"group {group} may not take part in a match (NULL vs '')")
    return fn(
        "regexp_extract_all",
        node.this,
        exp.Literal.string(regex.pattern),
        exp.Literal.number(group),
    )


def _regexp_replace(node: exp.Expr) -> exp.Expr:
    """Spark replaces every match; DuckDB only the first unless the options say 'g'."""
    options = node.args.get("modifiers")
    flags = literal_text(options, "the options") if options else ""
    regex = _regex(node, node.expression, exp.Literal.string(flags.replace("g", "")))
    if "g" not in flags and not regex.anchored:
        refuse(node, "DuckDB replaces only the first match without 'g'; Spark replaces all")
    if regex.matches_empty:
        refuse(node, "a pattern that can match the empty string")
    replacement = java_replacement(
        node, literal_text(node.args["replacement"], "the replacement"), regex
    )
    return fn(
        "regexp_replace",
        node.this,
        exp.Literal.string(regex.pattern),
        exp.Literal.string(replacement),
    )


def java_replacement(node: exp.Expr, text: str, regex: JavaRegex) -> str:
    """RE2's replacement (``\\1`` groups, ``\\\\`` a backslash) as Java's (``$1``, ``\\$``).

    >>> java_replacement(exp.null(), "<\\\\1>$", re2_to_java("(a)"))
    '<$1>\\\\$'
    """
    out, at = [], 0
    while at < len(text):
        char = text[at]
        follow = text[at + 1 : at + 2]
        if char == "\\" and follow.isdigit():
            if int(follow) > regex.groups or regex.groups > 9:
                refuse(node, f"replacement refers to group {follow} of {regex.groups}")
            out.append("$" + follow)
        elif char == "\\" and follow == "\\":
            out.append("\\\\")
        elif char == "\\":
            refuse(node, "a backslash escape in the replacement is not RE2")
        else:
            out.append("\\" + char if char in "$\\" else char)
            at -= 1
        at += 2
    return "".join(out)


# ------------------------------------------------------------------ lists


def _element(node: exp.Expr, index: exp.Expr) -> exp.Expr:
    """DuckDB lists are 1-based with NULL out of range, like Spark's try_element_at, except that
    Spark fails on index 0 where DuckDB returns NULL."""
    need(
        node.this if not isinstance(node, exp.Anonymous) else node.expressions[0],
        {"list"},
        "the list",
    )
    need(index, {"integer"}, "the index")
    target = node.this if not isinstance(node, exp.Anonymous) else node.expressions[0]
    if isinstance(index, exp.Literal | exp.Neg):
        number = literal_int(index, "the index")
        if number == 0 or abs(number) >= 2**31:
            return exp.null()
        return fn("try_element_at", target, index)
    # Spark's index is an INT: a larger one is out of range (NULL) in DuckDB
    found = fn("try_element_at", target, cast(index, exp.DataType.build("INT")))
    out = exp.Or(
        this=exp.EQ(this=index.copy(), expression=exp.Literal.number(0)),
        expression=exp.GTE(this=fn("abs", index.copy()), expression=exp.Literal.number(2**31)),
    )
    return exp.Case(ifs=[exp.If(this=out, true=exp.null())], default=found)


def _bracket(node: exp.Expr) -> exp.Expr:
    if len(node.expressions) != 1 or isinstance(node.expressions[0], exp.Slice):
        refuse(node, "list slices are not translated")
    return _element(node, node.expressions[0])


def _list_extract(node: exp.Expr) -> exp.Expr:
    return _element(node, node.expressions[1])


def _list_position(node: exp.Expr) -> exp.Expr:
    """Not found is NULL in DuckDB and 0 in Spark; DuckDB also finds a NULL element, Spark
    never, so the searched value must be a non-NULL literal."""
    values, wanted = node.expressions
    need(values, {"list"}, "the list")
    if not isinstance(wanted, exp.Literal):
        refuse(node, "the searched value must be a literal (DuckDB finds NULL elements)")
    position = fn("array_position", values, wanted)
    return exp.Nullif(this=position, expression=exp.Literal.number(0))


def _list_contains(node: exp.Expr) -> exp.Expr:
    """Spark answers NULL for a list holding a NULL and not the value; DuckDB answers false."""
    need(node.this, {"list"}, "the list")
    return fn("array_contains", fn("array_compact", node.this), node.expression)


def _list_distinct(node: exp.Expr) -> exp.Expr:
    """DuckDB drops NULL; its order is unspecified, so no order-dependent use can be exact."""
    need(node.this, {"list"}, "the list")
    return fn("array_distinct", fn("array_compact", node.this))


FUNCTIONS: dict[str, Rule] = {
    "list_position": _list_position,
    "list_indexof": _list_position,
    "array_position": _list_position,
    "array_indexof": _list_position,
    "list_extract": _list_extract,
    "list_element": _list_extract,
    "array_extract": _list_extract,
}
"""Rules for functions sqlglot parses as anonymous calls, by lower-case name."""


def _anonymous(node: exp.Expr) -> exp.Expr:
    rule = FUNCTIONS.get(str(node.this).lower())
    if rule is None:
        refuse(node, f"function {node.this}() is not on the list of translated functions")
    return rule(node)


# ------------------------------------------------------------------ dates and times


def _interval(node: exp.Expr) -> exp.Expr:
    unit = node.args["unit"].name.upper() if node.args.get("unit") else ""
    if unit not in ("DAY", "HOUR", "MINUTE", "SECOND", "MONTH", "YEAR"):
        refuse(node, f"an interval in {unit or 'an unnamed unit'} is not translated")
    if not str(node.this.name).lstrip("-").isdigit():
        refuse(node, "the interval's quantity must be a whole number")
    return node


MICROS = {"hour": 3_600_000_000, "minute": 60_000_000, "second": 1_000_000, "millisecond": 1_000}


def _date_diff(node: exp.Expr) -> exp.Expr:
    """DuckDB counts unit boundaries crossed; Spark's datediff(unit, ...) counts whole units."""
    unit = node.args["unit"].name.lower() if node.args.get("unit") else "day"
    start, end = node.expression, node.this
    for side in (start, end):
        need(side, {"date", "timestamp"}, "a date_diff argument")
    if unit == "day":
        return fn("datediff", cast(end, DATE), cast(start, DATE))
    if unit in ("month", "quarter", "year"):
        return exp.Sub(this=_calendar_index(end, unit), expression=_calendar_index(start, unit))
    if unit in MICROS:
        return exp.Sub(this=_boundary(end, MICROS[unit]), expression=_boundary(start, MICROS[unit]))
    refuse(node, f"date_diff in {unit} is not translated")


def _calendar_index(node: exp.Expr, unit: str) -> exp.Expr:
    year = fn("year", node.copy())
    if unit == "year":
        return year
    per_year, part = (12, "month") if unit == "month" else (4, "quarter")
    scaled = exp.Mul(this=year, expression=exp.Literal.number(per_year))
    return exp.Paren(this=exp.Add(this=scaled, expression=fn(part, node.copy())))


def _boundary(node: exp.Expr, micros: int) -> exp.Expr:
    """floor(epoch µs / unit), exactly, in integers (a DOUBLE would lose µs past 2^53)."""
    us = fn("unix_micros", cast(node, TIMESTAMP))
    whole = exp.Sub(this=us, expression=fn("pmod", us.copy(), exp.Literal.number(micros)))
    return exp.Paren(
        this=exp.IntDiv(this=exp.Paren(this=whole), expression=exp.Literal.number(micros))
    )


def _epoch(node: exp.Expr) -> exp.Expr:
    """epoch(x): seconds as DOUBLE, fractions kept (Spark's unix_timestamp drops them)."""
    arg = node.this.unnest() if isinstance(node.this, exp.Paren) else node.this
    family = kind(arg)
    if isinstance(arg, exp.Sub) and kind(arg.this) == kind(arg.expression) == "timestamp":
        micros: exp.Expr = exp.Sub(this=_micros(arg.this), expression=_micros(arg.expression))
    elif family in ("timestamp", "date"):
        micros = _micros(arg)
    else:
        refuse(node, f"epoch of {family} is not translated")
    return exp.Div(this=exp.Paren(this=micros), expression=exp.Literal.number("1000000.0D"))


def _micros(node: exp.Expr) -> exp.Expr:
    need(node, {"timestamp", "date"}, "a time")
    return fn("unix_micros", cast(node, TIMESTAMP))


def _unix_to_time(node: exp.Expr) -> exp.Expr:
    """sqlglot reads DuckDB's epoch_ms(TIMESTAMP) -> BIGINT as its inverse; the type decides."""
    scale = literal_int(node.args.get("scale"), "the epoch scale")
    family = kind(node.this)
    if scale == 3 and family == "timestamp":
        millis = fn("unix_millis", cast(node.this, TIMESTAMP))
        millis.type = BIGINT.copy()
        return millis
    if scale == 3 and family == "integer":
        return cast(fn("timestamp_millis", node.this), TIMESTAMP)
    refuse(node, f"epoch conversion of {family} at scale {scale} is not translated")


def _day_of_week(node: exp.Expr) -> exp.Expr:
    """DuckDB: Sunday 0 .. Saturday 6; Spark's dayofweek: Sunday 1 .. Saturday 7."""
    need(node.this, {"date", "timestamp"}, "the argument")
    return exp.Paren(
        this=exp.Sub(this=fn("dayofweek", node.this), expression=exp.Literal.number(1))
    )


def _iso_day_of_week(node: exp.Expr) -> exp.Expr:
    """ISO: Monday 1 .. Sunday 7; Spark's weekday: Monday 0 .. Sunday 6."""
    need(node.this, {"date", "timestamp"}, "the argument")
    return exp.Paren(this=exp.Add(this=fn("weekday", node.this), expression=exp.Literal.number(1)))


def _date_part(name: str) -> Rule:
    def rule(node: exp.Expr) -> exp.Expr:
        need(node.this, {"date", "timestamp"}, "the argument")
        return fn(name, node.this)

    return rule


# ------------------------------------------------------------------ the table

SAME_IN_SPARK: tuple[type[exp.Expr], ...] = (
    exp.Alias, exp.And, exp.Or, exp.Not, exp.Column, exp.Identifier, exp.Literal, exp.Null,
    exp.Boolean, exp.From, exp.Where, exp.Having, exp.Order, exp.Ordered, exp.Limit, exp.Offset,
    exp.Subquery, exp.Table, exp.TableAlias, exp.Paren, exp.Tuple, exp.Is, exp.Exists,
    exp.Distinct, exp.Window, exp.Lateral, exp.Filter, exp.Case, exp.If, exp.Coalesce, exp.Nullif,
    exp.Greatest, exp.Least, exp.Count, exp.Min, exp.Max, exp.RowNumber, exp.Rank, exp.DenseRank,
    exp.Lag, exp.Lead, exp.FirstValue, exp.LastValue, exp.IgnoreNulls, exp.AnyValue, exp.CountIf,
    exp.LogicalAnd, exp.LogicalOr, exp.Var, exp.DataType, exp.JSONPath, exp.Neg, exp.MD5,
    exp.Except, exp.Intersect,
)  # fmt: skip
"""Node types both engines evaluate alike, and sqlglot prints as Spark reads them."""

RULES: dict[type[exp.Expr], Rule] = {
    **dict.fromkeys(SAME_IN_SPARK, keep),
    exp.Select: _select,
    exp.Star: _star,
    exp.Join: _join,
    exp.Group: _group,
    exp.With: _with,
    exp.GenerateSeries: _range,
    exp.Explode: _unnest,
    exp.CTE: _cte,
    exp.Union: _union,
    exp.WindowSpec: _window_spec,
    **dict.fromkeys((exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE), _compare),
    exp.Between: _between,
    exp.Values: _values,
    exp.In: _in,
    exp.Add: _add_sub,
    exp.Sub: _add_sub,
    exp.Mul: _numeric_binary,
    exp.Mod: _numeric_binary,
    exp.Div: _div,
    exp.IntDiv: _int_div,
    exp.Abs: _unary_numeric,
    exp.Sqrt: _unary_numeric,
    exp.Ln: _unary_numeric,
    exp.Exp: _unary_numeric,
    exp.Pow: _numeric_binary,
    exp.Round: _round,
    exp.Ceil: _ceil_floor,
    exp.Floor: _ceil_floor,
    exp.Log: _log,
    exp.Sum: _sum,
    exp.Avg: _avg,
    exp.Median: _median,
    exp.PercentileCont: _quantile,
    exp.ArgMax: _arg_max_min,
    exp.ArgMin: _arg_max_min,
    exp.Stddev: _variance,
    exp.StddevSamp: _variance,
    exp.StddevPop: _variance,
    exp.Variance: _variance,
    exp.VariancePop: _variance,
    exp.Cast: _cast,
    exp.TryCast: _cast,
    exp.JSONExtractScalar: _json_scalar,
    exp.JSONExtract: _json_extract,
    exp.Lower: _lower,
    exp.Trim: _trim,
    exp.Length: _length,
    exp.Contains: _text_args,
    exp.StartsWith: _text_args,
    exp.EndsWith: _text_args,
    exp.Concat: _concat,
    exp.DPipe: _dpipe,
    exp.Replace: _replace,
    exp.SplitPart: _split_part,
    exp.Substring: _substring,
    exp.Split: _split,
    exp.Like: _like,
    exp.RegexpLike: _regexp_like,
    exp.RegexpFullMatch: _regexp_full_match,
    exp.RegexpExtract: _regexp_extract,
    exp.RegexpExtractAll: _regexp_extract_all,
    exp.RegexpReplace: _regexp_replace,
    exp.Bracket: _bracket,
    exp.ArrayContains: _list_contains,
    exp.ArrayDistinct: _list_distinct,
    exp.Anonymous: _anonymous,
    exp.Interval: _interval,
    exp.DateDiff: _date_diff,
    exp.TimeToUnix: _epoch,
    exp.UnixToTime: _unix_to_time,
    exp.DayOfWeek: _day_of_week,
    exp.DayOfWeekIso: _iso_day_of_week,
    exp.Hour: _date_part("hour"),
    exp.Minute: _date_part("minute"),
    exp.Second: _date_part("second"),
    exp.Day: _date_part("day"),
    exp.DayOfMonth: _date_part("day"),
    exp.Month: _date_part("month"),
    exp.Year: _date_part("year"),
    exp.Quarter: _date_part("quarter"),
    exp.DayOfYear: _date_part("dayofyear"),
}
"""Every translated node type; a type missing here is refused."""


def spark_node(node: exp.Expr) -> exp.Expr:
    """The Spark form of one node (its children already translated).

    Raises:
        Untranspilable: the node has no rule, or its rule refuses it.
    """
    rule = RULES.get(type(node))
    if rule is None:
        refuse(node, f"{type(node).__name__} is not on the list of translated constructs")
    return rule(node)
