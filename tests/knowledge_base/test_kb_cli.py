"""``autofe kb build`` and ``autofe kb search`` from the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autofe.cli import app


@pytest.fixture
def kb_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AUTOFE_KB_DIR", str(tmp_path / "kb"))
    return tmp_path / "kb"


def test_build_then_build_again_is_up_to_date(kb_dir: Path) -> None:
    runner = CliRunner()
    first = runner.invoke(app, ["kb", "build", "--json"])
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout)["built"] is True
    second = runner.invoke(app, ["kb", "build"])
    assert second.exit_code == 0 and "up to date" in second.stdout


def test_search_prints_documents_and_their_recipes(
    minilm_index: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AUTOFE_KB_DIR", str(minilm_index))
    result = CliRunner().invoke(
        app, ["kb", "search", "runtime jumps at month end", "--k", "3", "--json"]
    )
    assert result.exit_code == 0, result.output
    hits = json.loads(result.stdout)["hits"]
    assert len(hits) == 3 and all(h["recipes"] for h in hits)
    assert "calendar-month-end" in [h["doc_id"] for h in hits]


@pytest.mark.parametrize(
    ("args", "message"),
    [(["kb", "search", ""], "query: empty"), (["kb", "search", "skew", "--k", "0"], "k: must be")],
)
def test_bad_search_input_is_one_line(kb_dir: Path, args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert message in result.stderr and "Traceback" not in result.output
