"""The entry point: pick SQL or Python, read the script, cap the result."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from typing import Literal, TypeVar

from autofe.errors import ConfigError
from autofe.tools.profile_script.facts import _Facts
from autofe.tools.profile_script.models import MAX_ITEMS, ScriptProfile, _clip
from autofe.tools.profile_script.python_facts import _profile_python
from autofe.tools.profile_script.sql_parse import _profile_sql_text

T = TypeVar("T")


def profile_script(text: str, language: Literal["sql", "python", "auto"] = "auto") -> ScriptProfile:
    """Profile a Spark SQL script or a PySpark job without running it.

    Args:
        text: the script: one or more SQL statements, or a Python (PySpark) module.
        language: ``"auto"`` takes Python when the text parses as Python and imports something
            or uses ``spark.``/``dbutils.``, else SQL.

    Returns:
        The facts, every list capped at :data:`MAX_ITEMS`; what could not be read is in
        ``warnings``.

    Raises:
        ConfigError: the script is empty, or not one of its statements parses.

    >>> p = profile_script("SELECT dt, count(*) FROM db.events "
    ...                    "WHERE dt >= '2024-01-01' AND dt < '2024-02-01' GROUP BY dt")
    >>> p.tables_read, p.aggregations, p.group_by_columns, p.date_ranges[0].days
    (['db.events'], ['count'], 1, 31)
    """
    if _is_blank(text):
        raise ConfigError("script is empty")
    if language not in ("sql", "python", "auto"):
        raise ConfigError(f"language must be sql, python or auto, not {language!r}")
    chosen = _detect_language(text) if language == "auto" else language
    facts = _Facts()
    if chosen == "python":
        _profile_python(text, facts)
    else:
        _profile_sql_script(text, facts, pythonic=language == "auto" and _looks_pythonic(text))
    return _to_profile(chosen, facts)


_COMMENTS = re.compile(r"--[^\n]*|#[^\n]*|/\*.*?\*/", re.S)
_PYTHONIC = re.compile(
    r"^[ \t]*(import[ \t]+[\w.]+|from[ \t]+[\w.]+[ \t]+import\b)"
    r"|\b(spark|dbutils|sqlContext|sc)\s*\.\s*\w+(\s*\.\s*\w+)*\s*\(",
    re.M,
)


def _is_blank(text: str) -> bool:
    """True when nothing but whitespace and comments is left.

    >>> _is_blank("-- a\\n/* b */\\n# c\\n"), _is_blank("select 1 -- x")
    (True, False)
    """
    return not _COMMENTS.sub("", text).strip()


def _looks_pythonic(text: str) -> bool:
    """Imports, or calls on ``spark``/``dbutils`` (``SET spark.sql...`` in SQL is no call).

    >>> _looks_pythonic("from x import y"), _looks_pythonic("spark.read.table('t')")
    (True, True)
    >>> _looks_pythonic("select *\\nfrom\\n  t"), _looks_pythonic("SET spark.sql.x = 1")
    (False, False)
    """
    return bool(_PYTHONIC.search(text))


def _detect_language(text: str) -> Literal["sql", "python"]:
    """Python when the text parses as Python and looks like a Spark job.

    >>> _detect_language("import os\\nprint(1)"), _detect_language("SELECT 1")
    ('python', 'sql')
    """
    try:
        ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return "sql"
    return "python" if _looks_pythonic(text) else "sql"


def _to_profile(language: Literal["sql", "python"], facts: _Facts) -> ScriptProfile:
    def capped(name: str, items: Iterable[str]) -> list[str]:
        return _capped(name, sorted(items), facts)

    profile = ScriptProfile(
        language=language,
        statements=facts.statements,
        tables_read=capped("tables_read", (t for t in facts.read if t.lower() not in facts.views)),
        tables_written=capped("tables_written", facts.written),
        joins=_capped("joins", list(facts.joins.values()), facts),
        filters=_capped("filters", list(facts.filters.values()), facts),
        date_ranges=_capped("date_ranges", list(facts.ranges.values()), facts),
        aggregations=capped("aggregations", facts.aggregations),
        group_by_columns=facts.group_by_columns,
        window_functions=capped("window_functions", facts.windows),
        distinct=facts.distinct,
        order_by=facts.order_by,
        udfs=capped("udfs", facts.udfs),
        ml_estimators=_capped("ml_estimators", list(facts.ml_estimators), facts),
        subqueries=facts.subqueries,
        ctes=facts.ctes,
        unions=facts.unions,
        literals={k: _capped(k, list(v), facts) for k, v in sorted(facts.literals.items())},
        parameters=_capped("parameters", list(facts.params.used), facts),
        warnings=[],
    )
    return profile.model_copy(update={"warnings": [_clip(w) for w in facts.warnings[:MAX_ITEMS]]})


def _capped(name: str, items: list[T], facts: _Facts) -> list[T]:
    if len(items) > MAX_ITEMS:
        facts.warnings.append(f"{name}: {len(items)} found, first {MAX_ITEMS} kept")
    return items[:MAX_ITEMS]


def _profile_sql_script(text: str, facts: _Facts, *, pythonic: bool) -> None:
    errors = _profile_sql_text(text, facts)
    if facts.statements == 0:
        if pythonic:
            _profile_python(text, facts)
        first = errors[0] if errors else "no SQL statement found"
        raise ConfigError(f"SQL could not be parsed: {first}")
    facts.warnings.extend(f"statement skipped: {error}" for error in errors)
