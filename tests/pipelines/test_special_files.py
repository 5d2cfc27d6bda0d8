"""FIFOs, devices and sockets are refused by name before anything opens them.

Opening a FIFO for reading waits for a writer, so an ingest (or an MCP tool) handed one used to
hang forever. Each test keeps a releaser running that lets any reader of its FIFOs see end of
file at once: on code that still opens them the test fails instead of hanging, and the count
of released readers shows that nothing opened them.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from fifos import released
from typer.testing import CliRunner

from autofe.cli import app
from autofe.config import IngestSettings
from autofe.errors import ConfigError, ModelError, WarehouseError
from autofe.ingest.ingest import ingest
from autofe.modeling.artifact import load_model
from autofe.schema import IngestIssue, IngestReport
from autofe.warehouse.connect import open_warehouse

FIFO_REASON = "is a named pipe (FIFO), not a regular file: refused without opening it"
GOOD = ("dr-elephant/event_log_1", "sparklint/spark_event_log_example")
MINI = Path(__file__).resolve().parents[2] / "examples" / "workspaces" / "mini"
MAPPINGS = Path(__file__).resolve().parents[2] / "examples" / "mappings"


def _skipped(report: IngestReport) -> dict[str, str]:
    return {i.path: i.reason for i in report.issues if i.fatal}


def _stored_paths(db: Path) -> set[str]:
    con = open_warehouse(db)
    try:
        return {p for (p,) in con.execute("SELECT path FROM ingested_files").fetchall()}
    finally:
        con.close()


def test_a_fifo_given_or_found_in_a_folder_is_refused_and_the_batch_goes_on(
    tmp_path: Path, eventlogs: Path
) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    shutil.copy(eventlogs / GOOD[0], folder / "app-good")
    db = tmp_path / "w.duckdb"
    with released(folder / "app-pipe", tmp_path / "given-pipe") as opened:
        report = ingest(
            [folder, tmp_path / "given-pipe", eventlogs / GOOD[1]], IngestSettings(db, workers=1)
        )
    assert opened == []
    assert _skipped(report) == {
        str(folder / "app-pipe"): FIFO_REASON,
        str(tmp_path / "given-pipe"): FIFO_REASON,
    }
    assert report.applications == 2
    assert _stored_paths(db) == {str(folder / "app-good"), str(eventlogs / GOOD[1])}


def test_a_fifo_in_a_workspace_is_refused_and_its_other_files_are_kept(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    shutil.copytree(MINI, root)
    (root / "eventlogs").mkdir()
    db = tmp_path / "w.duckdb"
    with released(root / "runs" / "9999.json", root / "eventlogs" / "app-pipe") as opened:
        report = ingest([root], IngestSettings(db, workers=1))
    assert opened == []
    assert _skipped(report) == {
        str(root / "runs" / "9999.json"): FIFO_REASON,
        str(root / "eventlogs" / "app-pipe"): FIFO_REASON,
    }
    assert report.runs == 6 and report.applications > 0


def test_a_fifo_as_mapping_or_table_is_refused(tmp_path: Path, external: Path) -> None:
    db = tmp_path / "w.duckdb"
    mapping, table = tmp_path / "m.toml", tmp_path / "t.csv"
    with released(mapping, table) as opened:
        report = ingest([mapping, MAPPINGS / "ernest.toml"], IngestSettings(db, workers=1))
        assert _skipped(report) == {str(mapping): FIFO_REASON}
        assert report.runs > 0
        given = ingest([table], IngestSettings(db, workers=1), mapping=MAPPINGS / "ernest.toml")
        assert _skipped(given) == {str(table): FIFO_REASON}
        with pytest.raises(ConfigError, match=f"^{re.escape(f'{mapping}: {FIFO_REASON}')}$"):
            ingest([MAPPINGS / "ernest.toml"], IngestSettings(db, workers=1), mapping=mapping)
    assert opened == []


def test_a_device_is_refused_like_a_fifo(tmp_path: Path) -> None:
    report = ingest([Path("/dev/null")], IngestSettings(tmp_path / "w.duckdb", workers=1))
    reason = "is a character device, not a regular file: refused without opening it"
    assert report.issues == [IngestIssue("/dev/null", reason, fatal=True)]


def test_a_fifo_as_the_warehouse_is_refused_without_opening_it(tmp_path: Path) -> None:
    with (
        released(tmp_path / "autofe.duckdb") as opened,
        pytest.raises(WarehouseError, match=re.escape(FIFO_REASON)),
    ):
        open_warehouse(tmp_path / "autofe.duckdb")
    assert opened == []


def test_a_fifo_planted_as_a_model_manifest_is_refused(tmp_path: Path) -> None:
    (tmp_path / "model.joblib").write_bytes(b"not read")
    with (
        released(tmp_path / "model.manifest.json") as opened,
        pytest.raises(ModelError, match=re.escape(FIFO_REASON)),
    ):
        load_model(tmp_path, "any schema")
    assert opened == []


@pytest.mark.parametrize(
    "args",
    [
        ["features", "check", "{fifo}", "--db", "{tmp}/w.duckdb"],
        ["predict", "--model", "{fifo}", "--run-id", "1"],
        ["schedule", "plan", "--jobs", "{fifo}"],
        ["schedule", "plan", "--jobs={fifo}"],
        ["warehouse", "stats", "--db", "{fifo}"],
    ],
    ids=["feature-file", "model", "jobs", "jobs=", "db"],
)
def test_every_command_refuses_a_fifo_argument_in_one_line(tmp_path: Path, args: list[str]) -> None:
    fifo = tmp_path / "input"
    given = [a.format(fifo=fifo, tmp=tmp_path) for a in args]
    with released(fifo) as opened:
        result = CliRunner().invoke(app, given)
    assert result.exit_code == 2, result.output
    assert f"error: {fifo} {FIFO_REASON}" in " ".join(result.output.split())
    assert opened == []
    assert "Traceback" not in result.output
