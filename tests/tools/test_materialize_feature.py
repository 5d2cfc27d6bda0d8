"""materialize_feature: gated first, then every run's value stored in one transaction."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from autofe.errors import ConfigError, WarehouseError
from autofe.featurespec import FeatureSpec
from autofe.sandbox.limits import SandboxLimits
from autofe.sandbox.session import Sandbox
from autofe.tools.materialize_feature import gate_context, materialize_feature
from autofe.warehouse.feature_store import read_feature_values, write_feature

LEAKAGE = Path(__file__).resolve().parents[1] / "fixtures" / "leakage"


def spec(name: str) -> FeatureSpec:
    return FeatureSpec(name=name, sql=(LEAKAGE / f"{name}.sql").read_text(), category="history")


@pytest.fixture
def box(gates_warehouse: Path) -> Iterator[Sandbox]:
    # limits other than the defaults: the gates must open the file with the sandbox's settings
    with Sandbox.open(gates_warehouse, SandboxLimits(memory_limit="768MB")) as sandbox:
        yield sandbox


def stored_rows(store: Path) -> list[tuple[str, int]]:
    con = duckdb.connect(str(store), read_only=True)
    try:
        return con.execute(
            "SELECT feature_id, count(*) FROM feature_values GROUP BY ALL ORDER BY 1"
        ).fetchall()
    finally:
        con.close()


def test_clean_feature_stores_what_the_sandbox_computes(
    gates_warehouse: Path, box: Sandbox, tmp_path: Path
) -> None:
    feature = spec("accept_history_last_duration_ranked")
    store = tmp_path / "features.duckdb"
    result = materialize_feature(feature, gate_context(gates_warehouse, box), box, store)
    assert result.accepted and result.reasons == []
    assert result.feature_id == feature.feature_id
    direct = dict(box.query(feature.sql).rows)
    assert result.rows == len(direct) == box.query("SELECT count(*) FROM runs").rows[0][0]
    assert read_feature_values(store, feature.feature_id) == direct
    covered = sum(v is not None for v in direct.values()) / len(direct)
    assert result.coverage == pytest.approx(covered, abs=1e-6)


def test_leaky_feature_is_refused_and_nothing_is_written(
    gates_warehouse: Path, box: Sandbox, tmp_path: Path
) -> None:
    store = tmp_path / "features.duckdb"
    ctx = gate_context(gates_warehouse, box)
    result = materialize_feature(spec("reject_label_duration_ms"), ctx, box, store)
    assert not result.accepted and (result.rows, result.coverage) == (0, None)
    assert "label_leak" in {r.code for r in result.reasons}
    assert not store.exists()
    clean = materialize_feature(spec("accept_history_last_duration_ranked"), ctx, box, store)
    materialize_feature(spec("reject_label_duration_ms"), ctx, box, store)
    assert stored_rows(store) == [(clean.feature_id, clean.rows)]
    with pytest.raises(
        WarehouseError, match=r"not materialised .*accept_history_last_duration_ranked"
    ):
        read_feature_values(store, result.feature_id)


def test_rematerializing_replaces_the_feature(
    gates_warehouse: Path, box: Sandbox, tmp_path: Path
) -> None:
    store = tmp_path / "features.duckdb"
    ctx = gate_context(gates_warehouse, box)
    feature = spec("accept_history_last_duration_ranked")
    first = materialize_feature(feature, ctx, box, store)
    con = duckdb.connect(str(store))
    con.execute("INSERT INTO feature_values VALUES (?, 'ghost', 1.0, NULL)", [feature.feature_id])
    con.execute("UPDATE feature_values SET value = -1 WHERE feature_id = ?", [feature.feature_id])
    con.close()
    again = materialize_feature(feature, ctx, box, store)
    assert again.rows == first.rows
    values = read_feature_values(store, feature.feature_id)
    assert "ghost" not in values and values == dict(box.query(feature.sql).rows)
    con = duckdb.connect(str(store), read_only=True)
    assert con.execute("SELECT count(*) FROM features").fetchall() == [(1,)]
    con.close()


def test_the_store_must_not_be_the_warehouse(gates_warehouse: Path, box: Sandbox) -> None:
    ctx = gate_context(gates_warehouse, box)
    with pytest.raises(ConfigError, match="is the warehouse: give another file"):
        materialize_feature(spec("accept_history_last_duration_ranked"), ctx, box, gates_warehouse)


def test_reading_a_missing_store(tmp_path: Path) -> None:
    with pytest.raises(WarehouseError, match="does not exist: materialize a feature first"):
        read_feature_values(tmp_path / "none.duckdb", "abc")


def test_text_feature_is_stored_as_text(
    gates_warehouse: Path, box: Sandbox, tmp_path: Path
) -> None:
    feature = FeatureSpec(
        name="run_source",
        sql="SELECT run_id, source AS value FROM runs",
        category="static-config",
        value_type="VARCHAR",
    )
    store = tmp_path / "features.duckdb"
    result = materialize_feature(feature, gate_context(gates_warehouse, box), box, store)
    assert result.accepted, result.reasons
    assert read_feature_values(store, feature.feature_id) == dict(box.query(feature.sql).rows)


def test_store_writes_many_rows_and_booleans_as_numbers(tmp_path: Path) -> None:
    feature = FeatureSpec(
        name="flag",
        sql="SELECT run_id, true AS value FROM runs",
        category="static-config",
        value_type="BOOLEAN",
    )
    rows: list[tuple[str | None, bool | None]] = [
        (f"r{i}", i % 3 == 0 if i % 7 else None) for i in range(100_000)
    ]
    rows.append((None, True))  # no run: dropped
    stored = write_feature(tmp_path / "s.duckdb", feature, rows, coverage=0.5)
    assert stored.rows == 100_000
    values = read_feature_values(tmp_path / "s.duckdb", feature.feature_id)
    assert (values["r3"], values["r1"], values["r7"]) == (1.0, 0.0, None)
