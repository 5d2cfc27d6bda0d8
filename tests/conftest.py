"""Shared fixtures: where the third-party data lives, and a warehouse built once per session."""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest

from autofe.config import IngestSettings, external_data_dir
from autofe.featurespec import FeatureSpec
from autofe.ingest.ingest import ingest
from autofe.modeling.dataset import FeatureValues

REPO = Path(__file__).resolve().parents[1]

# Fixture generators need pyspark (the `spark` extra); they are run by hand, not collected.
# The browser tests need Playwright (the `ui` extra, `make test-ui`): without it they are not
# collected, so that `make test` works with the `dev` extra alone.
collect_ignore_glob = ["fixtures/*"] + ([] if importlib.util.find_spec("playwright") else ["ui/*"])


@pytest.fixture(scope="session")
def external() -> Path:
    """``../shared/data/external`` (real third-party data); tests skip when it is absent."""
    path = external_data_dir()
    if path is None:
        pytest.skip("../shared/data/external is not beside this checkout")
    return path


@pytest.fixture(scope="session")
def eventlogs(external: Path) -> Path:
    return external / "spark-eventlogs"


@pytest.fixture(scope="session")
def corpus_warehouse(tmp_path_factory: pytest.TempPathFactory, eventlogs: Path) -> Path:
    """The whole real event-log corpus ingested once; copy it before writing."""
    from autofe.ingest.event_logs import ingest_event_logs
    from autofe.schema import IngestReport
    from autofe.warehouse.connect import open_warehouse

    db = tmp_path_factory.mktemp("corpus") / "corpus.duckdb"
    con = open_warehouse(db)
    ingest_event_logs(con, [eventlogs], IngestReport())
    con.close()
    return db


@pytest.fixture
def warehouse_copy(tmp_path: Path, corpus_warehouse: Path) -> Path:
    dest = tmp_path / "w.duckdb"
    shutil.copy(corpus_warehouse, dest)
    return dest


@pytest.fixture(scope="session")
def gates_warehouse(tmp_path_factory: pytest.TempPathFactory, external: Path) -> Path:
    """Real history for the gates: the hand-written mini workspace, the event-log corpus and C3O.

    The 132 gate fixtures were written against exactly this mix. Built once and closed; open it
    read-only (the sandbox does) or copy it before writing.
    """
    from autofe.config import IngestSettings
    from autofe.ingest.ingest import ingest

    db = tmp_path_factory.mktemp("gates") / "gates.duckdb"
    inputs = [
        REPO / "examples" / "workspaces" / "mini",
        external / "spark-eventlogs",
        REPO / "examples" / "mappings" / "c3o.toml",
    ]
    ingest(inputs, IngestSettings(db=db, workers=1))
    return db


@pytest.fixture(scope="session")
def example_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped example workspace (``lab-small``) alone, ingested once; open it read-only."""
    from autofe.config import IngestSettings, example_workspace
    from autofe.ingest.ingest import ingest

    db = tmp_path_factory.mktemp("example") / "example.duckdb"
    ingest([example_workspace()], IngestSettings(db=db, workers=1))
    return db


@pytest.fixture(scope="session")
def minilm_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped knowledge base indexed once with the real offline MiniLM model."""
    from autofe.knowledge_base.retrieve import KnowledgeBase

    directory = tmp_path_factory.mktemp("kb-index")
    KnowledgeBase(index_dir=directory).dense()
    return directory


# ---------------------------------------------------------------- modeling: C3O history

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


@pytest.fixture(scope="session")
def manual_model(tmp_path_factory: pytest.TempPathFactory, example_warehouse: Path) -> Path:
    """The manual baseline trained once on the example workspace: ``model.joblib``'s folder."""
    from autofe.evals.manual import manual_features
    from autofe.pipelines.train import train_model

    out = tmp_path_factory.mktemp("manual-model")
    train_model(example_warehouse, manual_features(), out)
    return out


@pytest.fixture(scope="session")
def mapping_db(tmp_path_factory: pytest.TempPathFactory, external: Path) -> Callable[[str], Path]:
    """A shipped mapping's dataset ingested into its own warehouse, once per session."""
    made: dict[str, Path] = {}

    def db(name: str) -> Path:
        if name not in made:
            made[name] = tmp_path_factory.mktemp(name) / f"{name}.duckdb"
            ingest(
                [REPO / "examples" / "mappings" / f"{name}.toml"],
                IngestSettings(db=made[name], workers=1),
            )
        return made[name]

    return db


@pytest.fixture(scope="session")
def same_config_last() -> FeatureSpec:
    """The latest earlier successful run of the job on the same configuration: pure history of
    the held-out group under a configuration or machine-type protocol."""
    return FeatureSpec(
        name="same_config_last_s",
        category="history",
        sql=(
            "SELECT t.run_id, (SELECT h.duration_s FROM runs AS h "
            "WHERE h.cluster_config_id = t.cluster_config_id AND h.job_id = t.job_id "
            "AND h.status = 'SUCCEEDED' AND h.end_time < t.submit_time "
            "ORDER BY h.end_time DESC, h.run_id DESC LIMIT 1) AS value FROM runs AS t"
        ),
    )


@pytest.fixture(scope="session")
def example_run(tmp_path_factory: pytest.TempPathFactory, example_warehouse: Path) -> Path:
    """A finished ``autofe run`` on the shipped example with its whole run directory (model,
    metrics, holdout.json, report.html): one round of 45 candidates from the offline planner,
    enough to reach the recipes that cite the knowledge base. Built once; treat it as
    read-only (copy it to change it)."""
    from autofe.agents.settings import LoopSettings
    from autofe.config import example_workspace
    from autofe.pipelines.run import RunSettings, run

    out = tmp_path_factory.mktemp("example-run") / "run"
    settings = RunSettings(str(example_workspace()), LoopSettings(max_iterations=1, per_round=45))
    run(settings, out, warehouse=example_warehouse)
    return out
