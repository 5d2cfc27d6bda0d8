"""Run guarded read queries on a locked-down DuckDB connection, with time, memory and row limits.

The layers, outermost first:

1. :func:`~autofe.sandbox.guard.guard_sql` (sqlglot) refuses anything but one read query over
   warehouse tables calling allow-listed functions;
2. :func:`~autofe.sandbox.duckdb_parse.guard_duckdb_parse` checks DuckDB's own parse of the
   same text with the same lists, so the two parsers cannot disagree about what runs;
3. DuckDB itself: the warehouse opened read-only, no external access (files, URLs, extensions),
   no spilling to disk, a memory and a thread limit, then the configuration locked so no
   statement can undo any of it;
4. per query: a wall-clock timeout that interrupts it and a row limit on what is fetched.

DuckDB shares one database instance per file within a process and refuses to open a file
read-only while this process holds it with another configuration (a writer, or a plain
read-only connection): close those before :meth:`Sandbox.open`.

What the layers do not cover, measured on DuckDB 2.0.1: the memory limit counts buffers
(hash tables, sorts, aggregates, materialised results), not the strings and lists built while
an expression is evaluated, and the interrupt is only seen between chunks. The guard bounds
the functions that build big values from a size argument, but text that grows with the data
(``replace`` with a long replacement over a long column) can still overshoot both limits. For
hostile users, run the sandbox in a worker process with an address-space limit.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import duckdb

from autofe.errors import AutofeError, ConfigError, SandboxViolation, WarehouseError, first_line
from autofe.sandbox.duckdb_parse import guard_duckdb_parse
from autofe.sandbox.guard import guard_sql
from autofe.sandbox.limits import SandboxLimits
from autofe.warehouse.catalog import WarehouseCatalog, read_catalog

log = logging.getLogger(__name__)

GUARDED_KEPT = 16
"""Texts a sandbox remembers as guarded, for :meth:`Sandbox.query_renamed`."""
_PLAIN_NAME = re.compile(r"[a-z_][a-z0-9_]*")


class QueryError(AutofeError):
    """DuckDB could not run a query the sandbox allowed: the SQL is wrong, not hostile.

    Binder, type and conversion errors land here with DuckDB's first message line, so an agent
    can fix its query; :class:`~autofe.errors.SandboxViolation` is kept for policy and limits.
    """

    def __init__(self, message: str, sql: str = "") -> None:
        self.message = message
        self.sql = sql
        super().__init__(f"query failed: {message}")


class LimitExceeded(SandboxViolation):
    """A query the guards allowed ran into the timeout or the memory limit and was stopped.

    ``limit`` names it ("the 10 s timeout"): running the same query again would be stopped
    again, after as long, so callers that would re-run it (the gates) can skip that.
    """

    def __init__(self, limit: str, sql: str = "", *, timeout: bool = False) -> None:
        self.limit = limit
        self.timeout = timeout
        """The timeout, not the memory limit: a query stopped by it took as long as allowed."""
        super().__init__(f"query exceeded {limit}", sql)


@dataclass(frozen=True)
class QueryResult:
    """The first rows of a query's result and whether more existed."""

    columns: tuple[str, ...]
    types: tuple[str, ...]
    """DuckDB type names of the result columns (``BIGINT``, ``VARCHAR[]``, ``JSON``, ...)."""
    rows: list[tuple[Any, ...]]
    truncated: bool
    """More rows existed than the limit allowed to fetch."""
    seconds: float


def lockdown_settings(limits: SandboxLimits) -> tuple[tuple[str, str], ...]:
    """DuckDB settings of a sandboxed database, in the order they must be applied.

    Order matters: DuckDB refuses to change ``temp_directory`` once external access is off, and
    nothing can be changed after ``lock_configuration``.

    >>> [name for name, _ in lockdown_settings(SandboxLimits())][-2:]
    ['enable_external_access', 'lock_configuration']
    """
    return (
        # Stops spilling to disk: a query over the memory limit fails instead of writing files
        # (a batch may allow a bounded folder of its own, SandboxLimits.spill_dir).
        ("temp_directory", limits.spill_dir),
        ("max_temp_directory_size", limits.max_spill if limits.spill_dir else "0B"),
        # Stops one query from taking the machine.
        ("memory_limit", limits.memory_limit),
        ("threads", str(limits.threads)),
        # Stops extensions (httpfs, ...) being fetched or loaded behind a query's back.
        ("autoinstall_known_extensions", "false"),
        ("autoload_known_extensions", "false"),
        ("allow_community_extensions", "false"),
        ("allow_persistent_secrets", "false"),
        # Stops a table name resolving to a Python variable of the calling process.
        ("python_enable_replacements", "false"),
        # Stops every file, directory and URL access: COPY, ATTACH, EXPORT, INSTALL, read_*.
        ("enable_external_access", "false"),
        # Stops SET / RESET / PRAGMA from undoing any of the above.
        ("lock_configuration", "true"),
    )


def lock_down(con: duckdb.DuckDBPyConnection, limits: SandboxLimits) -> None:
    """Apply :func:`lockdown_settings` to ``con``'s database (they are global to it).

    A database this process already locked down (a second sandbox on the same file shares
    DuckDB's instance) is accepted as it is, with the first sandbox's limits.

    Raises:
        SandboxViolation: the configuration is locked but external access is still on.
        ConfigError: DuckDB rejects a limit (a malformed ``memory_limit``, say).
    """
    if _setting(con, "lock_configuration") == "true":
        if _setting(con, "enable_external_access") != "false":
            raise SandboxViolation("the database's configuration is locked with external access on")
        return
    for name, value in lockdown_settings(limits):
        try:
            con.execute(f"SET {name} = ?", [value])
        except duckdb.Error as exc:
            raise ConfigError(f"sandbox setting {name} = {value!r}: {first_line(exc)}") from exc


def _setting(con: duckdb.DuckDBPyConnection, name: str) -> str:
    row = con.execute("SELECT current_setting(?)::VARCHAR", [name]).fetchone()
    return str(row[0]).lower() if row else ""


class Sandbox:
    """A locked-down DuckDB connection that runs one guarded read query at a time per call.

    >>> import duckdb
    >>> from autofe.warehouse.catalog import code_catalog
    >>> with Sandbox.wrap(duckdb.connect(), code_catalog()) as box:
    ...     box.query("SELECT 40 + 2 AS answer").rows
    [(42,)]
    """

    def __init__(
        self, con: duckdb.DuckDBPyConnection, catalog: WarehouseCatalog, limits: SandboxLimits
    ) -> None:
        self._con = con
        self.catalog = catalog
        self.limits = limits
        self._guarded: dict[str, None] = {}
        """The last texts both guards passed (insertion-ordered), for :meth:`query_renamed`."""
        self._guarded_lock = threading.Lock()

    @classmethod
    def open(cls, db: Path, limits: SandboxLimits | None = None) -> Sandbox:
        """Open the warehouse at ``db`` read-only and lock it down.

        Raises:
            WarehouseError: the file does not exist, is no warehouse, or this process holds it
                open with another configuration (close writers first).
            ConfigError: DuckDB rejects one of ``limits``.
        """
        limits = limits or SandboxLimits()
        con = _connect_read_only(Path(db), limits)
        try:
            lock_down(con, limits)
            catalog = read_catalog(con)
        except duckdb.Error as exc:  # no column_catalog: some other DuckDB file
            con.close()
            raise WarehouseError(f"cannot use {db} as a warehouse: {first_line(exc)}") from exc
        except BaseException:
            con.close()
            raise
        return cls(con, catalog, limits)

    @classmethod
    def wrap(
        cls,
        con: duckdb.DuckDBPyConnection,
        catalog: WarehouseCatalog,
        limits: SandboxLimits | None = None,
    ) -> Sandbox:
        """Lock down a database the caller prepared (an in-memory scratch copy, say).

        The lockdown is global to ``con``'s database and cannot be undone: fill it first. An
        in-memory database cannot be made read-only, so there only the guards stop writes.
        """
        limits = limits or SandboxLimits()
        lock_down(con, limits)
        return cls(con, catalog, limits)

    def query(self, sql: str, limit: int | None = None) -> QueryResult:
        """Guard ``sql``, run it with the timeout, and fetch at most ``limit`` rows.

        Args:
            sql: one read query.
            limit: rows to return (default and ceiling: ``limits.max_rows``).

        Raises:
            SandboxViolation: the guards refused it, or (:class:`LimitExceeded`) it hit the
                timeout or the memory limit.
            QueryError: DuckDB could not run it (unknown column, type error, ...).
        """
        rows = self._row_limit(limit)
        guard_sql(sql, self.catalog)
        cursor = self._cursor(sql)
        try:
            return self._run(cursor, sql, rows)
        finally:
            cursor.close()

    def query_renamed(
        self, sql: str, guarded: str, renames: Mapping[str, str], limit: int | None = None
    ) -> QueryResult:
        """Run ``sql``, which is ``guarded`` with tables renamed, without guarding it again.

        The dynamic leakage check runs a feature in a dozen worlds whose SQL differs from the
        baseline's only in its views' names; parsing each text twice more (sqlglot, then
        DuckDB) was a third of the check's time. ``sql`` skips the guards only if ``guarded``
        passed both in this sandbox, every new name is a table of its catalog, and ``sql`` is
        exactly ``guarded`` with each old name replaced as a whole word. Identifiers of the same
        characters tokenise alike in both parsers, so the two texts parse to the same statement
        but for those names; a name also inside a literal or a comment, which a rename of the
        tree leaves alone, breaks the equality, and then ``sql`` is guarded in full.

        Raises:
            SandboxViolation: as for :meth:`query`.
            QueryError: as for :meth:`query`.
        """
        if not self._same_but_names(sql, guarded, renames):
            return self.query(sql, limit)
        rows = self._row_limit(limit)
        cursor = self._cursor(sql)
        try:
            return self._run(cursor, sql, rows, guard=False)
        finally:
            cursor.close()

    def _same_but_names(self, sql: str, guarded: str, renames: Mapping[str, str]) -> bool:
        with self._guarded_lock:
            known = guarded in self._guarded
        names = (*renames, *renames.values())
        if not known or not all(_PLAIN_NAME.fullmatch(n) for n in names):
            return False
        if not set(renames.values()) <= self.catalog.tables():
            return False
        pattern = re.compile(
            r"(?<![\w$])("
            + "|".join(re.escape(n) for n in sorted(renames, key=len, reverse=True))
            + r")(?![\w$])"
        )
        return pattern.sub(lambda m: renames[m.group(1)], guarded) == sql

    def _remember_guarded(self, sql: str) -> None:
        with self._guarded_lock:
            self._guarded.pop(sql, None)
            self._guarded[sql] = None
            while len(self._guarded) > GUARDED_KEPT:
                del self._guarded[next(iter(self._guarded))]

    def profile(self, sql: str) -> dict[str, Any]:
        """Guard ``sql``, run it with the timeout, and return DuckDB's profile of the run.

        The profile (``EXPLAIN (ANALYZE, FORMAT json)``) has every operator with the rows it
        produced: what :func:`~autofe.sandbox.work.plan_work` turns into a cost that, unlike a
        time, is the same on every machine.

        Raises:
            SandboxViolation: as for :meth:`query`.
            QueryError: as for :meth:`query`.
        """
        guard_sql(sql, self.catalog)
        cursor = self._cursor(sql)
        try:
            with Deadline(cursor, self.limits.timeout_s):
                guard_duckdb_parse(cursor, sql, self.catalog)
                rows = cursor.execute(f"EXPLAIN (ANALYZE, FORMAT json) {sql}").fetchall()
        except duckdb.Error as exc:
            raise self._translate(exc, sql) from exc
        finally:
            cursor.close()
        plan: dict[str, Any] = json.loads(rows[0][1])
        return plan

    def _row_limit(self, limit: int | None) -> int:
        if limit is None:
            return self.limits.max_rows
        if limit < 0:
            raise ConfigError(f"row limit must be >= 0, not {limit}")
        return min(limit, self.limits.max_rows)

    def _cursor(self, sql: str) -> duckdb.DuckDBPyConnection:
        try:
            return self._con.cursor()
        except duckdb.Error as exc:
            raise QueryError(f"sandbox connection unusable: {first_line(exc)}", sql) from exc

    def _run(
        self, cursor: duckdb.DuckDBPyConnection, sql: str, limit: int, *, guard: bool = True
    ) -> QueryResult:
        started = time.monotonic()
        try:
            with Deadline(cursor, self.limits.timeout_s):
                if guard:
                    guard_duckdb_parse(cursor, sql, self.catalog)
                    self._remember_guarded(sql)
                cursor.execute(sql)
                rows = cursor.fetchmany(limit + 1)
        except duckdb.Error as exc:
            raise self._translate(exc, sql) from exc
        description = cursor.description or []
        return QueryResult(
            columns=tuple(str(d[0]) for d in description),
            types=tuple(str(d[1]) for d in description),
            rows=rows[:limit],
            truncated=len(rows) > limit,
            seconds=time.monotonic() - started,
        )

    def _translate(self, exc: duckdb.Error, sql: str) -> AutofeError:
        """DuckDB's error as ours: limits and lockdown are violations, the rest query errors."""
        if isinstance(exc, duckdb.InterruptException):
            return LimitExceeded(f"the {self.limits.timeout_s:g} s timeout", sql, timeout=True)
        if isinstance(exc, duckdb.OutOfMemoryException):
            return LimitExceeded(f"the {self.limits.memory_limit} memory limit", sql)
        if isinstance(exc, duckdb.PermissionException):  # the lockdown caught what guards missed
            log.warning("DuckDB's lockdown refused a guarded query: %s", first_line(exc))
            return SandboxViolation(f"DuckDB refused it: {first_line(exc)}", sql)
        return QueryError(first_line(exc), sql)

    def close(self) -> None:
        self._con.close()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class Deadline:
    """Interrupt a cursor's query once ``seconds`` have passed, unless it finished first.

    A lock makes "finished" and "interrupt" exclusive, so a late timer can never interrupt the
    next query on the same connection.
    """

    def __init__(self, cursor: duckdb.DuckDBPyConnection, seconds: float) -> None:
        self._cursor = cursor
        self._lock = threading.Lock()
        self._running = False
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True

    def _fire(self) -> None:
        with self._lock:
            if self._running:
                self._cursor.interrupt()

    def __enter__(self) -> Deadline:
        self._running = True
        self._timer.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        with self._lock:
            self._running = False
        self._timer.cancel()


def _connect_read_only(db: Path, limits: SandboxLimits) -> duckdb.DuckDBPyConnection:
    if not db.is_file():
        raise WarehouseError(f"warehouse {db} does not exist: run `autofe ingest` first")
    # Everything but the last two settings also goes in at connect time, so the database is
    # never open without them; the last two would block setting the rest (see lock_down).
    config: dict[str, str | bool | int | float | list[str]] = dict(lockdown_settings(limits)[:-2])
    try:
        return duckdb.connect(str(db), read_only=True, config=config)
    except duckdb.ConnectionException as exc:
        raise WarehouseError(
            f"cannot open {db} read-only: {first_line(exc)} "
            "(close this process's other connections to it first)"
        ) from exc
    except duckdb.ProgrammingError as exc:  # DuckDB parses the limits before the file
        raise ConfigError(f"sandbox limits {limits}: {first_line(exc)}") from exc
    except duckdb.Error as exc:
        raise WarehouseError(f"cannot open {db} read-only: {first_line(exc)}") from exc
