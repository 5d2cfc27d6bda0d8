"""Attacks as data: every ``tests/fixtures/sandbox/*.sql`` is refused or stopped, and harmless.

Each fixture is one statement under a header::

    -- expect: refuse <regex over the SandboxViolation reason>     (or: stopped)
    -- why: what the statement would do if it ran

``refuse`` must come from the guards, before DuckDB runs anything; ``stopped`` must be the
timeout or the memory limit, within the timeout plus a grace. ``{tmp}`` in the SQL is a
directory the test watches: nothing may appear in it, nor beside the warehouse, and the same
sandbox must answer a normal query afterwards.

The second half calls DuckDB directly on the locked-down connection, as if the guards had a
hole, and checks that DuckDB itself refuses file access, attachments, extensions and settings.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest
from sandbox_warehouse import FAST, RUNS, build_warehouse

from autofe.errors import SandboxViolation
from autofe.sandbox.session import Sandbox, lockdown_settings
from autofe.warehouse.catalog import code_catalog

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "sandbox"
HEADER = re.compile(r"^-- (expect|why): (.+)$")
MIN_ATTACKS = 30
GRACE_S = 3.0
"""DuckDB checks for an interrupt between chunks, so a stop may come a little late."""


@dataclass(frozen=True)
class Attack:
    """One fixture: what must happen, why it is an attack, and the statement."""

    path: Path
    stopped: bool
    reason: str
    why: str
    sql: str


def parse_attack(path: Path) -> Attack:
    lines = path.read_text().splitlines()
    fields: dict[str, str] = {}
    while lines and (match := HEADER.match(lines[0])):
        fields[match[1]] = match[2].strip()
        lines.pop(0)
    assert {"expect", "why"} <= fields.keys(), f"{path.name}: header needs expect and why"
    verdict, _, reason = fields["expect"].partition(" ")
    assert verdict in {"refuse", "stopped"}, f"{path.name}: expect refuse or stopped"
    assert verdict == "stopped" or reason, f"{path.name}: refuse needs a reason regex"
    return Attack(path, verdict == "stopped", reason, fields["why"], "\n".join(lines).strip())


ATTACKS = [parse_attack(p) for p in sorted(FIXTURES.glob("*.sql"))]


@dataclass
class Target:
    """The sandbox under attack and the places where nothing may appear."""

    box: Sandbox
    db: Path
    watched: Path


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    home = tmp_path_factory.mktemp("attacked")
    (home / "warehouse").mkdir()
    db = build_warehouse(home / "warehouse" / "w.duckdb")
    watched = home / "watched"
    watched.mkdir()
    with Sandbox.open(db, FAST) as box:
        yield Target(box, db, watched)


def test_there_are_enough_attacks_of_each_kind() -> None:
    assert len(ATTACKS) >= MIN_ATTACKS
    assert sum(a.stopped for a in ATTACKS) >= 5
    assert len({a.sql for a in ATTACKS}) == len(ATTACKS), "duplicate attacks"


class _ExecuteSpy:
    """A sandbox cursor that records every statement it executes (the guards' own probes
    included), so a test can tell whether the attack itself ever ran."""

    def __init__(self, cursor: Any) -> None:
        self._cursor = cursor
        self.executed: list[str] = []

    def execute(self, statement: str, *args: Any) -> Any:
        self.executed.append(statement)
        return self._cursor.execute(statement, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.path.stem)
def test_attack_is_refused_or_stopped(
    attack: Attack, target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    sql = attack.sql.replace("{tmp}", str(target.watched))
    spies: list[_ExecuteSpy] = []
    make_cursor = target.box._cursor

    def spied(statement: str) -> Any:
        spies.append(_ExecuteSpy(make_cursor(statement)))
        return spies[-1]

    monkeypatch.setattr(target.box, "_cursor", spied)
    started = time.monotonic()
    with pytest.raises(SandboxViolation) as caught:
        target.box.query(sql)
    elapsed = time.monotonic() - started
    reason = caught.value.reason
    if attack.stopped:
        assert re.search(r"timeout|memory limit", reason), reason
        assert elapsed < FAST.timeout_s + GRACE_S, f"stopped only after {elapsed:.1f} s"
        assert any(sql in spy.executed for spy in spies), "the spy saw the stopped query run"
    else:
        assert re.search(attack.reason, reason), f"{attack.path.name}: refused with {reason!r}"
        # a refusal never runs the query (checked by what ran, not by how long it took)
        assert all(sql not in spy.executed for spy in spies), "a refusal must not run the query"
        _assert_span_inside(caught.value, sql)
    assert list(target.watched.iterdir()) == []
    assert [p.name for p in target.db.parent.iterdir()] == ["w.duckdb"]
    assert target.box.query("SELECT count(*) AS n FROM runs").rows == [(RUNS,)]


def _assert_span_inside(violation: SandboxViolation, sql: str) -> None:
    if violation.span is not None:
        start, end = violation.span
        assert 0 <= start < end <= len(sql), violation.span


# Statements DuckDB must refuse by itself on a locked-down database: file access, attachments,
# extensions and every way of changing a setting back.
SECOND_LAYER = [
    "COPY runs TO '{tmp}/runs.csv'",
    "COPY (SELECT 1) TO '{tmp}/one.parquet' (FORMAT parquet)",
    "EXPORT DATABASE '{tmp}/dump'",
    "ATTACH '{tmp}/evil.duckdb' AS evil",
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM read_text('/etc/passwd')",
    "SELECT * FROM glob('/*')",
    "SELECT * FROM '/etc/passwd'",
    "SELECT * FROM '{tmp}/runs.csv'",
    "SELECT * FROM 'https://example.com/data.csv'",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SET enable_external_access = true",
    "SET lock_configuration = false",
    "SET GLOBAL memory_limit = '100GB'",
    "SET threads = 64",
    "SET temp_directory = '{tmp}/spill'",
    "RESET memory_limit",
    "PRAGMA memory_limit = '100GB'",
]
ONLY_READ_ONLY_FILE = [
    "ATTACH ':memory:' AS scratch",
    "CREATE TABLE pwned AS SELECT 1 AS a",
    "INSERT INTO runs (run_id) VALUES ('pwned')",
    "DROP TABLE runs",
]
LOCKED = {
    "enable_external_access": "false",
    "lock_configuration": "true",
    "temp_directory": "",
    "max_temp_directory_size": "0 bytes",
    "autoload_known_extensions": "false",
    "autoinstall_known_extensions": "false",
    "allow_community_extensions": "false",
    "python_enable_replacements": "false",
    "threads": "2",
}


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_warehouse(tmp_path_factory.mktemp("template") / "w.duckdb")


@pytest.fixture
def sandbox_db(tmp_path: Path, template: Path) -> Path:
    """A private copy alone in its directory (DuckDB shares one instance per file)."""
    (tmp_path / "warehouse").mkdir()
    return Path(shutil.copy(template, tmp_path / "warehouse" / "w.duckdb"))


def _settings(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    rows = con.execute(
        "SELECT name, value FROM duckdb_settings() WHERE name IN ?", [list(LOCKED)]
    ).fetchall()
    return {str(name): str(value) for name, value in rows}


@pytest.mark.parametrize("statement", SECOND_LAYER + ONLY_READ_ONLY_FILE)
def test_duckdb_refuses_on_the_opened_warehouse(
    statement: str, sandbox_db: Path, tmp_path: Path
) -> None:
    watched = tmp_path / "watched"
    watched.mkdir()
    with Sandbox.open(sandbox_db, FAST) as box:
        con = box._con  # the guards bypassed on purpose: only DuckDB stands in the way
        with pytest.raises(duckdb.Error):
            con.execute(statement.replace("{tmp}", str(watched))).fetchall()
        assert _settings(con) == LOCKED
        assert box.query("SELECT count(*) FROM runs").rows == [(RUNS,)]
    assert list(watched.iterdir()) == []
    assert [p.name for p in sandbox_db.parent.iterdir()] == ["w.duckdb"]


@pytest.mark.parametrize("statement", SECOND_LAYER)
def test_duckdb_refuses_on_a_wrapped_scratch_database(statement: str, tmp_path: Path) -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE runs AS SELECT 'r1' AS run_id")
    with Sandbox.wrap(con, code_catalog(), FAST):
        with pytest.raises(duckdb.Error):
            con.execute(statement.replace("{tmp}", str(tmp_path))).fetchall()
        assert _settings(con) == LOCKED
    assert list(tmp_path.iterdir()) == []


def test_opening_again_in_the_same_process_shares_the_locked_instance(sandbox_db: Path) -> None:
    config = dict(lockdown_settings(FAST)[:-2])
    with Sandbox.open(sandbox_db, FAST):
        other = duckdb.connect(str(sandbox_db), read_only=True, config=config)  # type: ignore[arg-type]
        with pytest.raises(duckdb.Error, match="file system operations are disabled"):
            other.execute("SELECT * FROM read_csv('/etc/passwd')")
        other.close()
