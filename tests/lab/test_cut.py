"""autofe lab cut: the shipped workspace as it stood on an earlier day."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autofe.cli import app
from autofe.config import example_workspace
from autofe.errors import ConfigError
from autofe.lab.cut import cut_workspace

UNTIL = datetime(2024, 3, 27)


@pytest.fixture(scope="module")
def cut(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("cut") / "night1"
    report = cut_workspace(example_workspace(), out, UNTIL)
    assert (report.kept, report.dropped) == (418, 72)
    return out


def _runs(root: Path) -> dict[int, dict[str, object]]:
    return {int(p.stem): json.loads(p.read_text()) for p in (root / "runs").glob("*.json")}


def test_only_runs_finished_before_the_cut_remain_with_their_logs(cut: Path) -> None:
    runs, full = _runs(cut), _runs(example_workspace())
    limit = UNTIL.timestamp() * 1000
    assert all(int(str(r["end_time"])) < limit for r in runs.values())
    assert {i for i, r in full.items() if int(str(r["end_time"])) < limit} == set(runs)
    clusters = {r["cluster_instance"]["cluster_id"] for r in runs.values()}  # type: ignore[index]
    assert {p.name for p in (cut / "cluster-logs").iterdir()} == clusters
    assert {p.stem for p in (cut / "clusters").glob("*.json")} == clusters
    manifest = json.loads((cut / "lab.json").read_text())
    assert set(map(int, manifest["runs"])) == set(runs)


def test_table_statistics_taken_after_the_cut_are_dropped(cut: Path) -> None:
    lines = (cut / "table_stats" / "lab_tables.csv").read_text().splitlines()
    original = (example_workspace() / "table_stats" / "lab_tables.csv").read_text().splitlines()
    assert lines[0] == original[0] and 1 < len(lines) < len(original)
    assert all(line.split(",")[1] < "2024-03-27" for line in lines[1:])


def test_the_cli_refuses_an_existing_folder_and_a_non_workspace(cut: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(
        app,
        [
            "lab",
            "cut",
            "--workspace",
            str(example_workspace()),
            "--until",
            "2024-03-20",
            "--out",
            str(cut),
        ],
    )
    assert result.exit_code == 2 and "exists; give a new folder" in result.output
    with pytest.raises(ConfigError, match="not a lab workspace"):
        cut_workspace(tmp_path, tmp_path / "out", UNTIL)
    assert not (tmp_path / "out").exists()
