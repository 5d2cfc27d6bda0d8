"""Real history for the modeling tests: C3O through its mapping, with raw-column features."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from autofe.config import IngestSettings
from autofe.modeling.dataset import FeatureValues
from autofe.pipelines.ingest import ingest

REPO = Path(__file__).resolve().parents[2]

FEATURES = {
    "job": "SELECT r.run_id, r.job_id AS value FROM runs r",
    "node_type": "SELECT r.run_id, c.node_type AS value FROM runs r "
    "JOIN cluster_configs c ON c.config_id = r.cluster_config_id",
    "vcpus": "SELECT r.run_id, c.vcpu_per_node * c.num_workers AS value FROM runs r "
    "JOIN cluster_configs c ON c.config_id = r.cluster_config_id",
    "memory_gb": "SELECT r.run_id, c.memory_gb_per_node * c.num_workers AS value FROM runs r "
    "JOIN cluster_configs c ON c.config_id = r.cluster_config_id",
    "data_mb": "SELECT run_id, value FROM run_attributes WHERE name = 'data_size_MB'",
    "mb_per_core": "SELECT r.run_id, a.value / (c.vcpu_per_node * c.num_workers) AS value "
    "FROM runs r JOIN cluster_configs c ON c.config_id = r.cluster_config_id "
    "JOIN run_attributes a ON a.run_id = r.run_id AND a.name = 'data_size_MB'",
}


@pytest.fixture(scope="session")
def c3o(tmp_path_factory: pytest.TempPathFactory, external: Path) -> duckdb.DuckDBPyConnection:
    db = tmp_path_factory.mktemp("c3o") / "c3o.duckdb"
    ingest([REPO / "examples" / "mappings" / "c3o.toml"], IngestSettings(db=db, workers=1))
    return duckdb.connect(str(db), read_only=True)


@pytest.fixture(scope="session")
def c3o_values(c3o: duckdb.DuckDBPyConnection) -> FeatureValues:
    return values(c3o)


def values(con: duckdb.DuckDBPyConnection) -> FeatureValues:
    """The features above plus every known-at-submit run attribute (the job's parameters)."""
    out: dict[str, dict[str, object]] = {
        name: dict(con.execute(sql).fetchall()) for name, sql in FEATURES.items()
    }
    rows = con.execute(
        "SELECT name, run_id, value FROM run_attributes WHERE availability = 'known_at_submit'"
    ).fetchall()
    for name, run_id, value in rows:
        out.setdefault(f"attr_{name}", {})[run_id] = value
    return out  # type: ignore[return-value]
