"""Sandbox sessions: results and row limits, errors, timeouts, and how a database is opened."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import duckdb
import pytest
from sandbox_warehouse import FAST, RUNS, build_warehouse

from autofe.errors import ConfigError, SandboxViolation, WarehouseError
from autofe.sandbox import session
from autofe.sandbox.duckdb_parse import guard_duckdb_parse
from autofe.sandbox.guard import guard_sql
from autofe.sandbox.limits import BATCH_MAX_SPILL, SandboxLimits, spilling
from autofe.sandbox.session import QueryError, Sandbox, lock_down
from autofe.schema import Availability
from autofe.warehouse.catalog import ColumnInfo, WarehouseCatalog, code_catalog


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_warehouse(tmp_path_factory.mktemp("session") / "w.duckdb")


@pytest.fixture
def db(tmp_path: Path, template: Path) -> Path:
    """A private copy: DuckDB shares one instance per file and process, limits included."""
    return Path(shutil.copy(template, tmp_path / "w.duckdb"))


@pytest.fixture
def box(db: Path) -> Iterator[Sandbox]:
    with Sandbox.open(db, FAST) as sandbox:
        yield sandbox


def test_a_result_carries_names_duckdb_types_and_rows(box: Sandbox) -> None:
    result = box.query(
        "SELECT run_id, duration_s, parameters, [1, 2] AS l, submit_time "
        "FROM runs ORDER BY run_id LIMIT 2"
    )
    assert result.columns == ("run_id", "duration_s", "parameters", "l", "submit_time")
    assert result.types == ("VARCHAR", "DOUBLE", "JSON", "INTEGER[]", "TIMESTAMP")
    assert [row[0] for row in result.rows] == ["run-0000", "run-0001"]
    assert not result.truncated
    assert 0 <= result.seconds < FAST.timeout_s


def test_rows_are_cut_at_the_limit_and_marked_truncated(box: Sandbox) -> None:
    small = box.query("SELECT run_id FROM runs", limit=5)
    assert len(small.rows) == 5 and small.truncated
    default = box.query("SELECT run_id FROM runs")
    assert len(default.rows) == FAST.max_rows < RUNS and default.truncated
    capped = box.query("SELECT run_id FROM runs", limit=10 * RUNS)
    assert len(capped.rows) == FAST.max_rows
    exact = box.query("SELECT run_id FROM runs LIMIT 5", limit=5)
    assert len(exact.rows) == 5 and not exact.truncated
    assert box.query("SELECT run_id FROM runs", limit=0).rows == []
    with pytest.raises(ConfigError):
        box.query("SELECT 1", limit=-1)


def test_sql_errors_are_query_errors_with_duckdbs_first_line(box: Sandbox) -> None:
    with pytest.raises(QueryError, match="Binder Error") as caught:
        box.query("SELECT run_id + 1 FROM runs")
    assert "\n" not in caught.value.message
    with pytest.raises(QueryError, match="Conversion Error"):
        box.query("SELECT 'abc'::INTEGER")


def test_a_timeout_interrupts_only_its_own_query(box: Sandbox) -> None:
    with pytest.raises(SandboxViolation, match=r"exceeded the 1 s timeout"):
        box.query("SELECT count(*) FROM range(1000000000000)")
    for _ in range(20):  # a late timer must never interrupt the next query
        assert box.query("SELECT 42").rows == [(42,)]


def test_threads_can_share_a_sandbox(box: Sandbox) -> None:
    sql = "SELECT count(*) FROM runs WHERE duration_s > {}"
    with ThreadPoolExecutor(4) as pool:
        counts = list(pool.map(lambda n: box.query(sql.format(n)).rows[0][0], range(60, 110)))
    assert counts[0] == RUNS - RUNS // 50 and counts[-1] == 0


def test_a_bad_limit_is_a_config_error(db: Path) -> None:
    with pytest.raises(ConfigError, match="memory_limit"):
        Sandbox.open(db, SandboxLimits(memory_limit="lots"))


def test_the_memory_limit_stops_a_query(db: Path) -> None:
    """With FAST's 1 s timeout a loaded machine (load 4, session 28) reached the clock before
    the memory limit; the timeout here is far above either, so only the memory limit can stop
    it, on any machine."""
    with Sandbox.open(db, replace(FAST, timeout_s=120.0)) as box:
        with pytest.raises(SandboxViolation, match="256MB memory limit"):
            box.query("SELECT list(i) FROM range(1000000000) AS t(i)")
        assert box.query("SELECT count(*) FROM runs").rows == [(RUNS,)]


WINDOW_OVER_6M = (
    "SELECT count(*), max(r) FROM (SELECT row_number() OVER "
    "(PARTITION BY i % 1000 ORDER BY hash(i)) AS r FROM range(6000000) AS t(i))"
)
"""A window that needs more than 64 MB at once (a history feature over a million runs, small)."""


def test_a_batch_may_spill_into_its_own_folder_and_the_folder_goes(
    db: Path, tmp_path: Path
) -> None:
    small = SandboxLimits(memory_limit="64MB", threads=2, timeout_s=60.0)
    with Sandbox.open(db, small) as box, pytest.raises(SandboxViolation, match="memory limit"):
        box.query(WINDOW_OVER_6M)
    folder = tmp_path / "spill"
    with spilling(small, folder) as batch:
        assert batch.spill_dir == str(folder) and batch.max_spill == BATCH_MAX_SPILL
        with Sandbox.open(db, batch) as box:
            assert box.query(WINDOW_OVER_6M).rows == [(6_000_000, 6_000)]
            settings = dict(
                box._con.execute("SELECT name, value FROM duckdb_settings()").fetchall()
            )
            assert settings["enable_external_access"] == "false"
            assert settings["temp_directory"] == str(folder)
            # DuckDB lets a query read its own temp folder; the guard refuses file functions
            with pytest.raises(SandboxViolation, match="read_text"):
                box.query(f"SELECT * FROM read_text('{folder}/*')")
    assert not folder.exists()


def test_a_spill_folder_that_cannot_be_made_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("a file, not a folder")
    with (
        pytest.raises(ConfigError, match=r"cannot make the spill folder .*taken/spill"),
        spilling(SandboxLimits(), tmp_path / "taken" / "spill"),
    ):
        pass


def test_the_warehouse_is_opened_locked_down(box: Sandbox) -> None:
    con = box._con  # read the settings directly: the guards refuse current_setting
    settings = dict(con.execute("SELECT name, value FROM duckdb_settings()").fetchall())
    assert settings["access_mode"] == "read_only"
    assert settings["enable_external_access"] == "false"
    assert settings["lock_configuration"] == "true"
    assert settings["temp_directory"] == ""
    assert settings["threads"] == "2"
    assert settings["memory_limit"].endswith("MiB")


def test_the_catalog_comes_from_the_warehouse(box: Sandbox) -> None:
    assert "runs" in box.catalog.tables()
    assert "ingested_files" not in box.catalog.tables()


def test_two_sandboxes_on_one_file_share_its_locked_instance(db: Path) -> None:
    with Sandbox.open(db, FAST) as first, Sandbox.open(db, FAST) as second:
        assert first.query("SELECT count(*) FROM runs").rows == [(RUNS,)]
        assert second.query("SELECT count(*) FROM runs").rows == [(RUNS,)]
        with pytest.raises(WarehouseError, match="other connections"):
            Sandbox.open(db, SandboxLimits(memory_limit="512MB"))


def test_open_refuses_while_this_process_writes_the_file(db: Path) -> None:
    writer = duckdb.connect(str(db))
    try:
        with pytest.raises(WarehouseError, match="close this process's other connections"):
            Sandbox.open(db, FAST)
    finally:
        writer.close()
    Sandbox.open(db, FAST).close()


def test_open_refuses_what_is_not_a_warehouse(tmp_path: Path) -> None:
    with pytest.raises(WarehouseError, match="does not exist"):
        Sandbox.open(tmp_path / "missing.duckdb")
    (tmp_path / "text.duckdb").write_text("not a database")
    with pytest.raises(WarehouseError, match="cannot open"):
        Sandbox.open(tmp_path / "text.duckdb")
    duckdb.connect(str(tmp_path / "empty.duckdb")).close()
    with pytest.raises(WarehouseError, match="column_catalog"):
        Sandbox.open(tmp_path / "empty.duckdb")


def test_wrap_locks_a_prepared_scratch_database() -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE runs AS SELECT 'r' || i AS run_id FROM range(3) AS t(i)")
    with Sandbox.wrap(con, code_catalog(), FAST) as box:
        assert box.query("SELECT count(*) FROM runs").rows == [(3,)]
        with pytest.raises(duckdb.Error, match="locked"):
            con.execute("SET memory_limit = '10GB'")
    with pytest.raises(QueryError, match="closed"):
        box.query("SELECT 1")


def test_lock_down_twice_is_harmless_but_a_foreign_lock_is_refused() -> None:
    con = duckdb.connect()
    lock_down(con, FAST)
    lock_down(con, FAST)
    foreign = duckdb.connect()
    foreign.execute("SET lock_configuration = true")
    with pytest.raises(SandboxViolation, match="external access on"):
        lock_down(foreign, FAST)


def _views_box() -> Sandbox:
    """A scratch database holding two copies of a runs table, as the leakage check's worlds do."""
    con = duckdb.connect()
    con.execute("CREATE TABLE w_runs AS SELECT 'r' || i AS run_id FROM range(3) AS t(i)")
    con.execute("CREATE TABLE w0a_runs AS SELECT 'r' || i AS run_id FROM range(2) AS t(i)")
    info = {
        (t, "run_id"): ColumnInfo(t, "run_id", "VARCHAR", Availability.KNOWN_AT_SUBMIT, "")
        for t in ("w_runs", "w0a_runs")
    }
    return Sandbox.wrap(con, WarehouseCatalog(info), FAST)


@pytest.fixture
def guards(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts either guard parses, in order."""
    seen: list[str] = []

    def counted(guard: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any) -> Any:
            seen.append(next(a for a in args if isinstance(a, str)))
            return guard(*args)

        return run

    monkeypatch.setattr(session, "guard_sql", counted(guard_sql))
    monkeypatch.setattr(session, "guard_duckdb_parse", counted(guard_duckdb_parse))
    return seen


BASE = "SELECT count(*) AS n FROM w_runs AS runs WHERE runs.run_id <> 'x'"
WORLD = "SELECT count(*) AS n FROM w0a_runs AS runs WHERE runs.run_id <> 'x'"
NAMED = "SELECT count(*) AS n FROM w_runs AS runs WHERE runs.run_id <> 'w_runs'"
"""A literal spelled like a view: a rename of the tree leaves it, a rename of the text would not."""


def test_a_guarded_query_with_its_tables_renamed_runs_unparsed(guards: list[str]) -> None:
    with _views_box() as box:
        assert box.query(BASE).rows == [(3,)]
        assert box.query_renamed(WORLD, BASE, {"w_runs": "w0a_runs"}).rows == [(2,)]
    assert guards == [BASE, BASE]  # sqlglot's and DuckDB's parse of the first text only


@pytest.mark.parametrize(
    ("sql", "guarded", "renames", "why"),
    [
        (WORLD, BASE, {"w_runs": "w0a_runs"}, "never guarded"),
        (NAMED.replace("FROM w_", "FROM w0a_"), NAMED, {"w_runs": "w0a_runs"}, "a literal"),
        (WORLD + " AND 1 = 1", BASE, {"w_runs": "w0a_runs"}, "more than the names changed"),
        (WORLD.replace("w0a_", "w9z_"), BASE, {"w_runs": "w9z_runs"}, "not in the catalog"),
        (WORLD, BASE, {"w_runs": "w0a_runs AS x"}, "not a plain name"),
    ],
)
def test_any_other_text_is_guarded_in_full(
    guards: list[str], sql: str, guarded: str, renames: dict[str, str], why: str
) -> None:
    with _views_box() as box:
        if why != "never guarded":
            box.query(guarded)
        guards.clear()
        try:
            box.query_renamed(sql, guarded, renames)
        except SandboxViolation as exc:
            assert why == "not in the catalog", exc
        assert guards[:1] == [sql], why


def test_a_renamed_text_smuggling_a_call_is_refused() -> None:
    smuggled = WORLD.replace("count(*)", "count(*) + length(current_setting('threads'))")
    with _views_box() as box:
        box.query(BASE)
        with pytest.raises(SandboxViolation, match="current_setting"):
            box.query_renamed(smuggled, BASE, {"w_runs": "w0a_runs"})


def test_only_the_last_guarded_texts_are_remembered(guards: list[str]) -> None:
    with _views_box() as box:
        box.query(BASE)
        for i in range(session.GUARDED_KEPT):
            box.query(f"SELECT {i} AS n")
        guards.clear()
        assert box.query_renamed(WORLD, BASE, {"w_runs": "w0a_runs"}).rows == [(2,)]
        assert guards[:1] == [WORLD]
