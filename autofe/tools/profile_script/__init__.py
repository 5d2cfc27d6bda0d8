"""Profile a Spark SQL or PySpark job script into the facts that drive its runtime.

Pure and static: SQL is parsed with sqlglot (Spark dialect, then Databricks, then DuckDB) and
Python with the stdlib ``ast``; nothing is executed, imported or connected to. ``tools/server.py``
wraps :func:`profile_script` as the MCP tool of the same name, so every list is capped at
:data:`MAX_ITEMS` and every string clipped at :data:`MAX_CHARS`: one huge script must not flood
the model reading the answer.

Where the facts are heuristic, and why (there is no catalog to ask):

* Unqualified columns in multi-table queries are attributed to a table by the columns a CTE or
  derived table is known to produce, then by the prefix naming convention (``c_custkey`` →
  ``customer``, ``ss_sold_date_sk`` → ``store_sales``) when exactly one table fits; otherwise the
  join side stays ``None``.
* Comma joins and ``CROSS JOIN`` count as ``inner`` when a WHERE equality links the two sides
  (Spark plans them so), else as ``cross``. Equalities reaching out of a subquery are joins of
  kind ``correlated``.
* Date ranges hold inclusive first and last days; ``days`` counts whole days (the partitions of a
  daily-partitioned table) and is ``None`` when an end is open or not literal. Relative bounds
  (``current_date - 7 days``) and template parameters (``${ds}``) are kept as written.
"""

from __future__ import annotations

from autofe.tools.profile_script.models import (
    MAX_CHARS,
    MAX_ITEMS,
    DateRange,
    JoinFact,
    ScriptProfile,
)
from autofe.tools.profile_script.profile import profile_script

__all__ = ["MAX_CHARS", "MAX_ITEMS", "DateRange", "JoinFact", "ScriptProfile", "profile_script"]
