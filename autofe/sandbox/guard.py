"""The parsing layer of the SQL sandbox: only one read query over warehouse tables gets through.

Every statement an agent or a user writes is parsed with sqlglot (DuckDB dialect) and its whole
tree is walked before DuckDB runs it (:func:`guard_sql`). The rules are allow-lists: one query
expression at the root, tables from the warehouse catalog (or CTEs in scope), and functions from
a fixed list of pure scalar, aggregate and window functions.
:func:`~autofe.sandbox.duckdb_parse.guard_duckdb_parse` then applies the same lists to DuckDB's
own parse of the same text, so a place where the two parsers disagree (comments, dollar quotes,
desugaring) cannot smuggle a statement or a call through. Whatever still gets past both meets the
last layer, DuckDB's own lockdown (see :mod:`autofe.sandbox.session`).

Refusals say what was refused. Before anything is parsed, the statement's tokens are screened
(:mod:`autofe.sandbox.statements`): a statement that is no query is named by its kind even when
sqlglot cannot parse it, and look-alike punctuation by its code point and offset. A statement
nested deeper than sqlglot's parser or the walks after it can follow is refused by the depth
check every parser of feature SQL shares (:mod:`autofe.sandbox.nesting`).

Functions decided against, so nobody re-adds them by accident:

* every table function except ``range``, ``generate_series`` and ``unnest``: the rest read files
  or URLs (``read_*``, ``glob``, ``*_scan``, ``sniff_csv``, ``parquet_*``), run SQL given as a
  string (``query``, ``query_table``, ``json_execute_serialized_sql``), report on the system
  (``duckdb_*``, ``pragma_*``, ``which_secret``) or change it (``checkpoint``,
  ``enable_profiling``);
* ``current_setting``, ``getvariable``, ``version``, ``current_query`` and the ``current_*``
  catalog/user names: they read configuration or session state, not telemetry, and a feature
  must depend on the warehouse only;
* ``getenv`` (CLI only, reads the environment), ``read_text``/``read_blob`` (table functions);
* ``nextval``/``setval``/``setseed``/``write_log``: they change state, so a query would not be a
  pure read; ``sleep_ms``/``pg_sleep``: a query that waits only burns the timeout;
* ``json_serialize_sql``/``json_serialize_plan`` and the ``pg_*``/``has_*_privilege`` shims:
  not needed by a feature, and each one is attack surface.

A function outside the list is refused by name with its span; adding one is a one-line change
to :data:`ALLOWED_FUNCTIONS` after checking that it touches nothing but its arguments.

Functions that build big values from a size argument (``repeat``, ``lpad``, ``printf`` widths,
scalar ``range``) must get small literal sizes
(:data:`~autofe.sandbox.duckdb_parse.MAX_GENERATED`): DuckDB neither counts such values against
its memory limit nor can interrupt one while it is being built.
"""

from __future__ import annotations

from collections.abc import Iterator

import sqlglot
from sqlglot import Token, exp
from sqlglot.errors import ParseError

from autofe.errors import SandboxViolation
from autofe.sandbox.nesting import NestedTooDeeply, check_depth
from autofe.sandbox.statements import (
    DIALECT,
    Span,
    not_a_query,
    statement_kind,
    statement_tokens,
    token_span,
)
from autofe.warehouse.catalog import WarehouseCatalog

_FUNCTION_FAMILIES: dict[str, str] = {
    "aggregate": """
        count count_star count_if countif sum avg mean min max median mode product fsum favg
        sumkahan kahan_sum first last any_value arbitrary arg_max arg_min argmax argmin
        max_by min_by list array_agg string_agg listagg group_concat bool_and bool_or
        bit_and bit_or bit_xor bitstring_agg approx_count_distinct approx_quantile
        approx_top_k quantile quantile_cont quantile_disc percentile_cont percentile_disc
        reservoir_quantile mad stddev stddev_pop stddev_samp variance var_pop var_samp
        covar_pop covar_samp corr sem skewness kurtosis kurtosis_pop entropy histogram
        histogram_exact regr_avgx regr_avgy regr_count regr_intercept regr_r2 regr_slope
        regr_sxx regr_sxy regr_syy geomean geometric_mean weighted_avg wavg json_group_array
        json_group_object
    """,
    "window": """
        row_number rank dense_rank rank_dense percent_rank cume_dist ntile lag lead
        first_value last_value nth_value fill
    """,
    "numeric and conditional": """
        abs sign signbit ceil ceiling floor round round_even roundbankers trunc even sqrt
        cbrt exp ln log log10 log2 pow power mod fmod fdiv divide add subtract multiply gcd
        lcm greatest_common_divisor least_common_multiple factorial gamma lgamma nextafter
        pi degrees radians sin cos tan cot asin acos atan atan2 sinh cosh tanh asinh acosh
        atanh isnan isinf isfinite random bit_count xor greatest least coalesce ifnull
        nullif if bar equi_width_bins
    """,
    "text": """
        length len strlen char_length character_length octet_length bit_length
        length_grapheme lower upper lcase ucase concat concat_ws substr substring
        substring_grapheme left right left_grapheme right_grapheme lpad rpad trim ltrim
        rtrim replace translate reverse repeat position strpos instr contains starts_with
        ends_with prefix suffix split split_part str_split string_split string_split_regex
        str_split_regex string_to_array like_escape ilike_escape not_like_escape
        not_ilike_escape ascii chr ord unicode format printf format_bytes formatreadablesize
        formatreadabledecimalsize parse_formatted_bytes strip_accents nfc_normalize
        levenshtein damerau_levenshtein editdist3 hamming mismatches jaccard jaro_similarity
        jaro_winkler_similarity
    """,
    "hashing, encoding and types": """
        hash md5 md5_number md5_number_lower md5_number_upper sha1 sha256 base64 to_base64
        from_base64 encode decode hex unhex to_hex from_hex bin unbin to_binary from_binary
        to_base url_encode url_decode typeof pg_typeof uuid gen_random_uuid uuidv4 uuidv7
    """,
    "regular expression": """
        regexp_matches regexp_full_match regexp_extract regexp_extract_all regexp_replace
        regexp_split_to_array regexp_split_to_table regexp_escape
    """,
    "date and time": """
        date_diff datediff date_sub datesub date_part datepart date_trunc datetrunc date_add
        age extract epoch epoch_ms epoch_us epoch_ns year month day hour minute second
        millisecond microsecond nanosecond week weekofyear yearweek weekday dayofweek
        dayofmonth dayofyear isodow isoyear quarter decade century millennium era julian
        dayname monthname last_day days_in_month make_date make_time make_timestamp
        make_timestamp_ms make_timestamp_ns make_timestamptz strftime strptime try_strptime
        to_timestamp time_bucket timezone timezone_hour timezone_minute normalized_interval
        to_years to_months to_quarters to_weeks to_days to_hours to_minutes to_seconds
        to_milliseconds to_microseconds to_decades to_centuries to_millennia current_date
        current_timestamp now today get_current_time get_current_timestamp
        transaction_timestamp current_localtime current_localtimestamp ago
    """,
    "list": """
        list_value list_pack list_extract list_element list_slice list_concat list_cat
        list_append list_prepend list_contains list_has list_has_any list_has_all
        list_position list_indexof list_distinct list_unique list_sort list_reverse_sort
        list_reverse list_grade_up list_transform list_apply list_filter list_reduce
        list_aggregate list_aggr list_select list_where list_zip list_resize list_intersect
        list_sum list_avg list_min list_max list_count list_first list_last list_median
        list_mode list_product list_stddev_samp list_stddev_pop list_var_samp list_var_pop
        list_kurtosis list_skewness list_entropy list_histogram list_string_agg
        list_bool_and list_bool_or list_any_value list_approx_count_distinct
        list_inner_product list_dot_product list_cosine_similarity list_cosine_distance
        list_distance list_negative_inner_product array_value array_length array_extract
        array_slice array_concat array_cat array_append array_prepend array_contains
        array_has array_has_any array_has_all array_position array_indexof array_distinct
        array_unique array_sort array_reverse_sort array_reverse array_grade_up
        array_transform array_apply array_filter array_reduce array_aggregate array_aggr
        array_select array_where array_zip array_resize array_intersect array_to_string
        array_to_json array_inner_product array_dot_product array_cosine_similarity
        array_cosine_distance array_distance array_cross_product array_pop_back
        array_pop_front cardinality flatten element_at grade_up generate_series range
        generate_subscripts unnest filter reduce apply
    """,
    "struct, map, union and enum": """
        struct_pack struct_extract struct_extract_at struct_insert struct_update
        struct_concat struct_contains struct_has struct_position struct_indexof struct_keys
        struct_values row map map_keys map_values map_entries map_extract map_extract_value
        map_from_entries map_concat map_contains map_contains_entry map_contains_value
        union_extract union_tag union_value enum_code enum_first enum_last enum_range
        enum_range_boundary
    """,
    "json": """
        json json_extract json_extract_string json_extract_path json_extract_path_text
        json_value json_exists json_keys json_type json_valid json_array_length
        json_contains json_structure json_transform json_transform_strict from_json
        from_json_strict to_json row_to_json json_object json_array json_quote
        json_merge_patch json_deep_merge json_remove json_strip_nulls json_pretty
    """,
    "star expression": """
        columns
    """,
    "sqlglot node keys": """
        cast trycast case anyvalue argmax argmin groupconcat percentilecont percentiledisc
        approxquantile jsonobject strposition array struct exists overlay currentdate
        currenttimestamp
    """,
}

ALLOWED_FUNCTIONS = frozenset(
    name for names in _FUNCTION_FAMILIES.values() for name in names.split()
)
"""Lower-case DuckDB function names a query may call, as written.

The "sqlglot node keys" family holds no DuckDB names: sqlglot builds those nodes from syntax
(``CAST``, ``CASE``, ``[1, 2]``) or from a name it recognises without keeping the written
name, so their type is what gets checked. Operators (``AND``, ``->>``, ``~``) name no
function and pass.
"""

TABLE_FUNCTIONS = frozenset({"range", "generate_series", "unnest"})
"""Table functions allowed in FROM: they generate rows and touch no file, URL or setting."""

# Anything that is not a read query: DDL, DML, COPY, settings, extensions, attachments,
# transactions, and every statement sqlglot only knows as an opaque Command (LOAD, CALL, ...).
NOT_QUERIES: tuple[type[exp.Expr], ...] = (
    exp.DDL,
    exp.DML,
    exp.Drop,
    exp.Alter,
    exp.TruncateTable,
    exp.Command,
    exp.Set,
    exp.SetItem,
    exp.Pragma,
    exp.Attach,
    exp.Detach,
    exp.Install,
    exp.Use,
    exp.Describe,
    exp.Summarize,
    exp.Show,
    exp.Analyze,
    exp.Transaction,
    exp.Commit,
    exp.Rollback,
    exp.Cache,
    exp.Uncache,
    exp.LoadData,
    exp.Refresh,
    exp.Kill,
    exp.Grant,
    exp.Revoke,
    exp.Comment,
    exp.Export,
    exp.Into,
    exp.Declare,
    exp.Execute,
    exp.Pivot,
)


def guard_sql(sql: str, catalog: WarehouseCatalog) -> exp.Expression:
    """Parse ``sql`` and refuse it unless it is one read query over the warehouse.

    Args:
        sql: one DuckDB statement, as an agent or a user wrote it.
        catalog: the warehouse's tables; only these (and CTEs in scope) may be read.

    Returns:
        The parsed query, for callers that go on to qualify or rewrite it.

    Raises:
        SandboxViolation: with the reason and, when sqlglot knows it, the offending span.

    Sizes of generated values and DuckDB's own reading of the text are checked by
    :func:`~autofe.sandbox.duckdb_parse.guard_duckdb_parse`, which needs a connection;
    ``Sandbox.query`` runs both.

    >>> from autofe.warehouse.catalog import code_catalog
    >>> guard_sql("SELECT count(*) FROM runs", code_catalog()).sql()
    'SELECT COUNT(*) FROM runs'
    >>> guard_sql("COPY runs TO 'x.csv'", code_catalog())  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    autofe.errors.SandboxViolation: refused: COPY statements are not allowed: only one read ...
    """
    tree = parse_single(sql)
    for node in tree.walk():
        _check_node(node, sql, catalog)
    return tree


def parse_single(sql: str) -> exp.Expression:
    """Exactly one statement, and it is a query (SELECT, WITH … SELECT, set operations).

    >>> type(parse_single("WITH a AS (SELECT 1) SELECT * FROM a UNION SELECT 2")).__name__
    'Union'
    >>> parse_single("EXPORT DATABASE 'dump'")  # sqlglot cannot parse it; its keywords say what
    Traceback (most recent call last):
    autofe.errors.SandboxViolation: refused: EXPORT DATABASE statements are not allowed: \
only one read query (SELECT / WITH) may run at "EXPORT DATABASE 'dump'"
    """
    return _parse_query(sql, statement_tokens(sql))


def _parse_query(sql: str, tokens: list[Token]) -> exp.Expression:
    kind = statement_kind(tokens)
    try:
        parsed = sqlglot.Dialect.get_or_raise(DIALECT).parser().parse(tokens, sql)
    except ParseError as exc:
        if kind is not None:  # the parser fails on it, but what it is shows in its keywords
            raise SandboxViolation(not_a_query(kind), sql, token_span(tokens)) from exc
        raise SandboxViolation(
            f"cannot parse as DuckDB SQL: {_first_error(exc)}", sql, _error_span(exc, sql)
        ) from exc
    except RecursionError as exc:  # sqlglot parses recursively; Python's stack is the limit
        raise NestedTooDeeply(sql) from exc
    tree = parsed[0] if len(parsed) == 1 else None
    if tree is not None:
        check_depth(tree, sql)
    if not (isinstance(tree, exp.Query) and isinstance(tree, exp.Expression)):
        named = kind or (type(tree).__name__ if tree is not None else tokens[0].text).upper()
        raise SandboxViolation(not_a_query(named), sql, token_span(tokens))
    return tree


def _first_error(exc: ParseError) -> str:
    first = exc.errors[0] if exc.errors else {}
    return f"{first.get('description', exc)} (line {first.get('line')}, col {first.get('col')})"


def _error_span(exc: ParseError, sql: str) -> Span | None:
    """Where sqlglot stopped: its line and column point at the end of the highlighted token.

    >>> try:
    ...     sqlglot.parse_one("SELECT (1", dialect="duckdb")
    ... except ParseError as exc:
    ...     _error_span(exc, "SELECT (1")
    (8, 9)
    """
    first = exc.errors[0] if exc.errors else {}
    line, col, token = first.get("line"), first.get("col"), str(first.get("highlight") or "")
    if not (isinstance(line, int) and isinstance(col, int)) or line < 1:
        return None
    lines = sql.split("\n")
    end = sum(len(text) + 1 for text in lines[: line - 1]) + col
    start = max(end - len(token), 0)
    return (start, min(end, len(sql))) if start < min(end, len(sql)) else None


def _check_node(node: exp.Expr, sql: str, catalog: WarehouseCatalog) -> None:
    if isinstance(node, NOT_QUERIES):
        kind = type(node).__name__.upper()
        raise SandboxViolation(f"{kind} is not allowed inside a query", sql, node_span(node, sql))
    if isinstance(node, exp.Table):
        _check_table(node, sql, catalog)
    elif isinstance(node, exp.Func):
        _check_function(node, sql)


def _check_table(table: exp.Table, sql: str, catalog: WarehouseCatalog) -> None:
    # Other schemas and catalogs hold DuckDB's system views and any attached database.
    if table.catalog or (table.db and table.db.lower() != "main"):
        where = ".".join(p for p in (table.catalog, table.db) if p)
        raise SandboxViolation(
            f"only the warehouse's main schema is readable, not {where}", sql, node_span(table, sql)
        )
    if isinstance(table.this, exp.Func):
        return  # a table function: checked as a function in FROM position
    name = table.name.lower()
    if name in catalog.tables() or in_cte_scope(table):
        return
    span = node_span(table, sql)
    if span and sql[span[0]] == "'":  # DuckDB reads a string in FROM as a file or URL
        raise SandboxViolation("a string in FROM is a file read (replacement scan)", sql, span)
    raise SandboxViolation(f"table {table.name!r} is not in the warehouse catalog", sql, span)


def in_cte_scope(table: exp.Table) -> bool:
    """Whether ``table`` names a CTE visible where it stands (DuckDB's scoping rules).

    A CTE sees the CTEs before it in its WITH (all of them, itself included, under RECURSIVE);
    the query body sees them all; nothing outside the WITH's query sees any.

    >>> q = sqlglot.parse_one("WITH a AS (SELECT 1), b AS (SELECT * FROM a) SELECT * FROM b")
    >>> [in_cte_scope(t) for t in q.find_all(exp.Table)]
    [True, True]
    >>> q = sqlglot.parse_one("WITH a AS (SELECT * FROM b), b AS (SELECT 1) SELECT 1")
    >>> [in_cte_scope(t) for t in q.find_all(exp.Table)]
    [False]
    """
    name = table.name.lower()
    return any(cte.alias_or_name.lower() == name for cte in visible_ctes(table))


def visible_ctes(table: exp.Table) -> Iterator[exp.Expr]:
    """The CTEs visible where ``table`` stands, nearest first (DuckDB's scoping rules, as in
    :func:`in_cte_scope`): the name's own WITH first, the last CTE of each WITH first.

    >>> q = sqlglot.parse_one("WITH a AS (SELECT 1), b AS (SELECT * FROM a) SELECT * FROM b")
    >>> [[c.alias for c in visible_ctes(t)] for t in q.find_all(exp.Table)]
    [['b', 'a'], ['a']]
    """
    child: exp.Expr = table
    while (parent := child.parent) is not None:
        yield from reversed(_visible_here(parent, child))
        child = parent


def _visible_here(parent: exp.Expr, child: exp.Expr) -> list[exp.Expr]:
    if isinstance(parent, exp.With):
        return list(parent.expressions) if parent.recursive else parent.expressions[: child.index]
    with_ = parent.args.get("with_")
    if isinstance(with_, exp.With) and child is not with_:
        return list(with_.expressions)
    return []


def _check_function(func: exp.Func, sql: str) -> None:
    name = function_name(func, sql)
    if name is None:
        return  # an operator (AND, ->>, ~, @>): it names no function
    allowed = TABLE_FUNCTIONS if _in_from(func) else ALLOWED_FUNCTIONS
    if name not in allowed:
        kind = "table function" if allowed is TABLE_FUNCTIONS else "function"
        raise SandboxViolation(f"{kind} {name!r} is not allowed", sql, node_span(func, sql))
    # system.main.f(), or x.f() method syntax: a qualifier could reach another catalog's f
    if isinstance(func.parent, exp.Dot) and func.parent.expression is func:
        raise SandboxViolation(
            f"qualified or method-style call to {name!r}: call it as {name}(...)",
            sql,
            node_span(func.parent, sql),
        )


def function_name(func: exp.Func, sql: str) -> str | None:
    """The lower-case name DuckDB will call, or None for an operator.

    As written when sqlglot kept its position; else sqlglot's node key (``CAST``, ``CASE``).

    >>> q = "SELECT regexp_matches(a, 'x'), CAST(a AS INT), foo(1), a ->> 'k'"
    >>> [function_name(f, q) for f in sqlglot.parse_one(q, dialect="duckdb").find_all(exp.Func)]
    ['regexp_matches', 'cast', 'foo', None]
    """
    if isinstance(func, exp.Anonymous | exp.AnonymousAggFunc):
        return func.name.lower()
    start, end = func.meta.get("start"), func.meta.get("end")
    if isinstance(start, int) and isinstance(end, int):
        return sql[start : end + 1].lower()
    return None if isinstance(func, exp.Binary) else func.key


def _in_from(func: exp.Func) -> bool:
    """A function that is itself a FROM item (not one inside a JOIN's ON condition)."""
    from_item = isinstance(func.parent, exp.Table | exp.From | exp.Join | exp.Lateral)
    return from_item and func.arg_key == "this"


def node_span(node: exp.Expr, sql: str | None = None) -> Span | None:
    """``(start, end)`` offsets covering every token of ``node`` sqlglot kept a position for.

    With ``sql`` (the text ``node`` was parsed from) the span also takes in the closing
    parentheses of its calls, which sqlglot keeps no position for.

    >>> q = "SELECT * FROM runs r WHERE lower(run_id) = 'x'"
    >>> nodes = sqlglot.parse_one(q).find_all(exp.Table, exp.Lower)
    >>> [q[slice(*node_span(n, q))] for n in nodes]
    ['runs r', 'lower(run_id)']
    """
    starts: list[int] = []
    ends: list[int] = []
    for sub in node.walk():
        start, end = sub.meta.get("start"), sub.meta.get("end")
        if isinstance(start, int) and isinstance(end, int):
            starts.append(start)
            ends.append(end + 1)
    if not starts:
        return None
    return _close_parens(sql, min(starts), max(ends)) if sql else (min(starts), max(ends))


def _close_parens(sql: str, start: int, end: int) -> Span:
    """Extend a span over the closing parentheses its calls still miss (sqlglot keeps none)."""
    while sql.count("(", start, end) > sql.count(")", start, end):
        rest = sql[end:]
        if not rest.lstrip().startswith(")"):
            break
        end += len(rest) - len(rest.lstrip()) + 1
    return (start, end)
