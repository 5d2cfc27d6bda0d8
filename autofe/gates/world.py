"""Perturbed worlds: the warehouse as it stood at a cutoff, with everything learnt later rewritten.

The dynamic leakage check recomputes a feature in scratch copies of the warehouse where every
fact learnt at or after a cutoff (a target run's submit time) was altered or deleted. A
feature that only uses what was known before the cutoff computes the same value there.

What "learnt at or after the cutoff" means comes from the column catalog's tags
(``docs/schema.md``): runs submitted after the cutoff are gone; post-execution values of runs
that had not ended strictly before it (the target's own included) are changed or removed;
table snapshots taken after it and jobs defined at or after it likewise. Other runs submitted
at the very instant stay: their submit-time facts are known at submit. So does a snapshot
taken at that instant: it was written before the run was submitted (the static check's
``SNAPSHOT_CUTOFF``), so ``as_of <= submit_time`` computes the same in every world.

Cost is the point of the layout: all worlds live in one in-memory database as views
(``w0a_runs``, ``w0d_runs``, ``w1a_runs``...) over one copy of the tables the feature reads,
next to the unperturbed baseline (``w_runs``), and the feature's SQL is rewritten per world to
read that world's views. Building a view takes ~1 ms where a table copy takes ~10 ms and a
fresh connection (one per world) another ~12 ms.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from pathlib import Path

import duckdb
from sqlglot import exp

from autofe.sandbox.guard import in_cte_scope
from autofe.warehouse.catalog import ColumnInfo, WarehouseCatalog
from autofe.warehouse.tables import TABLES

SOURCE = "_warehouse"
"""The in-memory copy of the warehouse tables the worlds' views read (another schema: the
sandbox's guard refuses any qualified table, so a feature cannot read it directly)."""
FILE = "_warehouse_file"
"""The warehouse file, attached read-only only while copying from it."""


class Variant(StrEnum):
    """How facts learnt at or after the cutoff are hidden; each catches leaks the other misses."""

    ALTER = "alter"
    """Values changed, rows kept: catches ``COALESCE(own_duration, 0)`` and ``IS NULL`` tricks."""
    DELETE = "delete"
    """Rows deleted, values nulled: catches counts of the target's own stages or later rows."""


@dataclass(frozen=True)
class Views:
    """A set of views standing in for the warehouse tables, named with a prefix."""

    prefix: str

    def view(self, table: str) -> str:
        return f"{self.prefix}{table}"


BASELINE = Views("w_")
"""The warehouse as it is (the same copy the worlds read): what the feature computes really."""


@dataclass(frozen=True)
class World(Views):
    """One perturbed world: its views, its cutoff, and how the future is hidden."""

    cutoff: datetime
    variant: Variant


Domains = dict[tuple[str, str], tuple[str, str]]
"""Lowest and highest value seen per hidden text column: what a perturbed value flips between."""


@dataclass(frozen=True)
class Cut:
    """What a world's SQL needs to know of its cutoff."""

    at: str
    """The cutoff as a SQL literal (views take no parameters)."""
    visible: str
    """The table of runs known at the cutoff (see :func:`visible_sql`)."""
    domains: Domains = field(default_factory=dict)


def quote(name: str) -> str:
    """A DuckDB identifier.

    >>> quote('duration_s')
    '"duration_s"'
    """
    return '"' + name.replace('"', '""') + '"'


def timestamp_literal(value: datetime) -> str:
    """A cutoff as a SQL literal: views, unlike statements, take no parameters.

    >>> timestamp_literal(datetime(2024, 2, 11, 6, 0, 1, 500))
    "TIMESTAMP '2024-02-11 06:00:01.000500'"
    """
    return f"TIMESTAMP '{value.isoformat(sep=' ')}'"


def _primary_key(table: str) -> frozenset[str]:
    return next((frozenset(t.primary_key) for t in TABLES if t.name == table), frozenset())


def perturbed(col: str, type_: str, salt: int, cut: Cut, domain: tuple[str, str] | None) -> str:
    """An expression whose value differs from column expression ``col``'s, NULL included.

    Numbers are scaled and shifted (so differences and ratios change too), timestamps move
    later (a run that had not ended by the cutoff still has not), each column by a different
    amount (``salt``) so that ``end_time - start_time`` changes as well. Text flips between
    the lowest and highest value the column holds, so ``status = 'FAILED'`` flips too (a
    constant like ``'PERTURBED'`` would leave it false).

    >>> cut = Cut("TIMESTAMP '2024-01-01 00:00:00'", "v")
    >>> perturbed("x.duration_s", "DOUBLE", 2, cut, None)
    'COALESCE(x.duration_s, 0) * 7.3 + 1236.5'
    >>> perturbed("x.end_time", "TIMESTAMP", 1, cut, None)
    "COALESCE(x.end_time, TIMESTAMP '2024-01-01 00:00:00') + INTERVAL 18817 MINUTE"
    >>> perturbed("x.status", "VARCHAR", 3, cut, ("FAILED", "SUCCEEDED"))
    "CASE WHEN x.status = 'FAILED' THEN 'SUCCEEDED' ELSE 'FAILED' END"
    """
    if type_ == "VARCHAR" and domain and domain[0] != domain[1]:
        low, high = _literal(domain[0]), _literal(domain[1])
        return f"CASE WHEN {col} = {low} THEN {high} ELSE {low} END"
    if type_ == "DOUBLE":
        return f"COALESCE({col}, 0) * 7.3 + {1234.5 + salt}"
    if type_ in ("BIGINT", "INTEGER"):
        return f"TRY_CAST(COALESCE({col}, 0)::HUGEINT * 3 + {1234 + salt} AS {type_})"
    if type_ == "TIMESTAMP":
        return f"COALESCE({col}, {cut.at}) + INTERVAL {13 * 24 * 60 + 97 * salt} MINUTE"
    if type_ == "BOOLEAN":
        return f"NOT COALESCE({col}, false)"
    if type_ == "VARCHAR":
        return "'PERTURBED'"
    if type_ == "JSON":
        return """'{"perturbed": true}'::JSON"""
    if type_.endswith("[]"):
        return f"list_concat(COALESCE({col}, []::{type_}), [{1234 + salt}]::{type_})"
    return f"CAST(NULL AS {type_})"


def _columns(catalog: WarehouseCatalog, table: str) -> list[ColumnInfo]:
    return [info for (t, _), info in catalog.columns.items() if t == table]


def _select(
    table: str,
    catalog: WarehouseCatalog,
    variant: Variant,
    cut: Cut,
    known: str,
    hide: Callable[[str], bool],
) -> str:
    """Every column of ``table`` (as ``x``); those ``hide`` names are hidden unless ``known``."""
    parts = []
    for salt, c in enumerate(_columns(catalog, table)):
        col = f"x.{quote(c.column)}"
        if hide(c.column):
            domain = cut.domains.get((table, c.column))
            other = (
                "NULL" if variant is Variant.DELETE else perturbed(col, c.type, salt, cut, domain)
            )
            col = f"CASE WHEN {known} THEN {col} ELSE {other} END"
        parts.append(f"{col} AS {quote(c.column)}")
    return ", ".join(parts)


def _post(catalog: WarehouseCatalog, table: str) -> Callable[[str], bool]:
    """Post-execution columns, except the keys joins need (their values are not the leak)."""
    keys = _primary_key(table) | {"run_id"}

    def hide(column: str) -> bool:
        return column not in keys and catalog.is_post_execution(table, column)

    return hide


def hidden(catalog: WarehouseCatalog, table: str) -> Callable[[str], bool]:
    """The columns a world alters where their row was learnt at or after the cutoff.

    ``run_attributes`` is tagged per row (its values), ``table_stats`` by snapshot time (all
    but the key); other tables by their columns' tags.
    """
    if table == "run_attributes":
        return {"value", "value_text"}.__contains__
    if table == "table_stats":
        keys = _primary_key(table)
        return lambda column: column not in keys
    return _post(catalog, table)


def runs_sql(catalog: WarehouseCatalog, variant: Variant, cut: Cut) -> str:
    """Runs known at the cutoff; post-execution values of those not ended before it hidden."""
    cols = _select("runs", catalog, variant, cut, "v.ended", hidden(catalog, "runs"))
    return f"SELECT {cols} FROM {SOURCE}.runs AS x JOIN {cut.visible} AS v USING (run_id)"


def per_run_sql(catalog: WarehouseCatalog, variant: Variant, cut: Cut, table: str) -> str:
    """A run's telemetry (applications, stages...): only of runs known at the cutoff.

    In the delete variant the rows of runs not ended before the cutoff go as well.
    """
    cols = _select(table, catalog, variant, cut, "v.ended", hidden(catalog, table))
    where = " WHERE v.ended" if variant is Variant.DELETE else ""
    source = f"{SOURCE}.{quote(table)} AS x JOIN {cut.visible} AS v USING (run_id)"
    return f"SELECT {cols} FROM {source}{where}"


def run_attributes_sql(catalog: WarehouseCatalog, variant: Variant, cut: Cut) -> str:
    """Attributes of known runs; post-execution ones (tagged per row) only if it had ended."""
    known = "(x.availability <> 'post_execution' OR v.ended)"
    source = f"{SOURCE}.run_attributes AS x JOIN {cut.visible} AS v USING (run_id)"
    if variant is Variant.DELETE:
        return f"SELECT x.* FROM {source} WHERE {known}"
    cols = _select(
        "run_attributes", catalog, variant, cut, known, hidden(catalog, "run_attributes")
    )
    return f"SELECT {cols} FROM {source}"


def table_stats_sql(catalog: WarehouseCatalog, variant: Variant, cut: Cut) -> str:
    """Snapshots taken at or before the cutoff; those taken after it altered or deleted."""
    known = f"x.as_of <= {cut.at}"
    if variant is Variant.DELETE:
        return f"SELECT x.* FROM {SOURCE}.table_stats AS x WHERE {known}"
    cols = _select("table_stats", catalog, variant, cut, known, hidden(catalog, "table_stats"))
    return f"SELECT {cols} FROM {SOURCE}.table_stats AS x"


def jobs_sql(catalog: WarehouseCatalog, variant: Variant, cut: Cut) -> str:
    """Jobs defined before the cutoff (or with a known run: the job existed, whatever it says)."""
    return (
        f"SELECT x.* FROM {SOURCE}.jobs AS x WHERE x.created_time IS NULL "
        f"OR x.created_time < {cut.at} OR x.job_id IN (SELECT job_id FROM {cut.visible})"
    )


def cluster_configs_sql(catalog: WarehouseCatalog, variant: Variant, cut: Cut) -> str:
    """Configurations of known runs, and those no run uses (nothing dates them)."""
    return (
        f"SELECT x.* FROM {SOURCE}.cluster_configs AS x "
        f"WHERE x.config_id IN (SELECT cluster_config_id FROM {cut.visible}) "
        f"OR NOT EXISTS (SELECT 1 FROM {SOURCE}.runs AS r WHERE r.cluster_config_id = x.config_id)"
    )


TableSql = Callable[[WarehouseCatalog, Variant, Cut], str]

BUILDERS: dict[str, TableSql] = {
    "runs": runs_sql,
    "run_attributes": run_attributes_sql,
    "table_stats": table_stats_sql,
    "jobs": jobs_sql,
    "cluster_configs": cluster_configs_sql,
}

DEPENDS_ON: dict[str, tuple[str, ...]] = {"cluster_configs": ("runs",)}
"""Source tables a table's world SQL reads besides its own (``runs`` is always copied)."""


def table_sql(catalog: WarehouseCatalog, variant: Variant, cut: Cut, table: str) -> str:
    """The SELECT defining ``table`` in a world.

    Tables without a rule of their own: per-run telemetry if they have ``run_id``, else copied.
    """
    if table in BUILDERS:
        return BUILDERS[table](catalog, variant, cut)
    if catalog.info(table, "run_id") is not None:
        return per_run_sql(catalog, variant, cut, table)
    return f"SELECT * FROM {SOURCE}.{quote(table)}"


def visible_sql(cut: Cut) -> str:
    """Runs known at the cutoff: submitted by then (or, undated, ended before it).

    ``ended`` marks those whose post-execution facts are known: ended strictly before it.
    """
    return (
        f"CREATE TABLE {cut.visible} AS SELECT run_id, job_id, cluster_config_id, "
        f"COALESCE(end_time < {cut.at}, false) AS ended FROM {SOURCE}.runs "
        f"WHERE submit_time <= {cut.at} OR (submit_time IS NULL AND end_time < {cut.at})"
    )


def open_scratch(db: Path) -> duckdb.DuckDBPyConnection:
    """An in-memory database with the warehouse file attached read-only.

    Attaching works while the sandbox holds the same file open read-only (a second
    ``connect`` with another configuration would not).

    Raises:
        duckdb.Error: the file cannot be attached.
    """
    con = duckdb.connect(":memory:")
    try:
        con.execute(f"ATTACH {_literal(str(db))} AS {FILE} (READ_ONLY)")
    except BaseException:
        con.close()
        raise
    return con


def build_worlds(
    con: duckdb.DuckDBPyConnection,
    catalog: WarehouseCatalog,
    cutoffs: Sequence[datetime],
    tables: Iterable[str],
) -> list[World]:
    """The baseline and both variants' worlds for every cutoff, as views over one copy.

    Copies the tables read into memory and detaches the warehouse file (attached by
    :func:`open_scratch`): a feature run here can reach nothing but the copy, and the
    sandbox's guard refuses that schema.

    Raises:
        duckdb.Error: the warehouse cannot be read.
    """
    wanted = sorted(set(tables) & catalog.tables())
    _copy_sources(con, {"runs", *wanted, *(d for t in wanted for d in DEPENDS_ON.get(t, ()))})
    for name in wanted:
        con.execute(
            f"CREATE VIEW {quote(BASELINE.view(name))} AS SELECT * FROM {SOURCE}.{quote(name)}"
        )
    domains = text_domains(con, catalog, wanted)
    worlds = []
    for i, cutoff in enumerate(cutoffs):
        cut = Cut(timestamp_literal(cutoff), f"{SOURCE}._visible_{i}", domains)
        con.execute(visible_sql(cut))
        for variant in Variant:
            world = World(f"w{i}{variant.value[0]}_", cutoff, variant)
            for name in wanted:
                sql = table_sql(catalog, variant, cut, name)
                con.execute(f"CREATE VIEW {quote(world.view(name))} AS {sql}")
            worlds.append(world)
    return worlds


def _copy_sources(con: duckdb.DuckDBPyConnection, tables: Iterable[str]) -> None:
    """Copy the tables once into memory and let go of the file."""
    con.execute(f"ATTACH ':memory:' AS {SOURCE}")
    for name in sorted(tables):
        con.execute(f"CREATE TABLE {SOURCE}.{quote(name)} AS SELECT * FROM {FILE}.{quote(name)}")
    con.execute(f"DETACH {FILE}")


def text_domains(
    con: duckdb.DuckDBPyConnection, catalog: WarehouseCatalog, tables: Iterable[str]
) -> Domains:
    """Lowest and highest value of every text column a world may alter, one query per table."""
    domains: Domains = {}
    for table in tables:
        hide = hidden(catalog, table)
        columns = [
            c.column for c in _columns(catalog, table) if c.type == "VARCHAR" and hide(c.column)
        ]
        if not columns:
            continue
        aggs = ", ".join(f"min({quote(c)}), max({quote(c)})" for c in columns)
        row = con.execute(f"SELECT {aggs} FROM {SOURCE}.{quote(table)}").fetchall()[0]
        for i, column in enumerate(columns):
            low, high = row[2 * i], row[2 * i + 1]
            if low is not None and high is not None:
                domains[(table, column)] = (str(low), str(high))
    return domains


def world_catalog(
    catalog: WarehouseCatalog, worlds: Iterable[Views], tables: Iterable[str]
) -> WarehouseCatalog:
    """The catalog the sandbox admits here: every world's views, tagged as their tables."""
    wanted = set(tables) & catalog.tables()
    columns = {
        (world.view(info.table), info.column): ColumnInfo(
            world.view(info.table), info.column, info.type, info.availability, info.ordered_by
        )
        for world in worlds
        for (table, _), info in catalog.columns.items()
        if table in wanted
    }
    return WarehouseCatalog(columns)


def in_world(tree: exp.Query, world: Views, tables: Iterable[str]) -> exp.Query:
    """The feature reading ``world``'s views; each keeps its table's name as alias.

    >>> import sqlglot
    >>> w = World("w0a_", datetime(2024, 1, 1), Variant.ALTER)
    >>> q = sqlglot.parse_one("SELECT runs.run_id FROM runs JOIN stages s USING (run_id)")
    >>> in_world(q, w, {"runs", "stages"}).sql()
    'SELECT runs.run_id FROM w0a_runs AS runs JOIN w0a_stages AS s USING (run_id)'
    """
    wanted = set(tables)
    out = tree.copy()
    targets = [
        t
        for t in out.find_all(exp.Table)
        if isinstance(t.this, exp.Identifier) and t.name.lower() in wanted and not in_cte_scope(t)
    ]
    for t in targets:
        name = t.name.lower()
        if not t.alias:
            t.set("alias", exp.TableAlias(this=exp.to_identifier(t.name)))
        t.set("this", exp.to_identifier(world.view(name)))
    return out


def _literal(text: str) -> str:
    """A SQL string literal.

    >>> _literal("it's")
    "'it''s'"
    """
    return "'" + text.replace("'", "''") + "'"
