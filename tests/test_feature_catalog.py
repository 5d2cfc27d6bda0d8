from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autofe.cli import app
from autofe.console import EXIT_USER_ERROR
from autofe.errors import ConfigError
from autofe.feature_catalog import load_catalog, read_feature_file, save_catalog
from autofe.featurespec import FeatureSpec, Provenance

runner = CliRunner()

LAST_RUN = """-- name: last_duration
-- category: history
-- why: the previous finished run of the same job predicts this one
SELECT t.run_id, (
  SELECT h.duration_s FROM runs h
  WHERE h.job_id = t.job_id AND h.end_time < t.submit_time
  ORDER BY h.end_time DESC LIMIT 1) AS value
FROM runs t
"""


def _spec(name: str = "workers", sql: str = "SELECT run_id, 1 AS value FROM runs") -> FeatureSpec:
    return FeatureSpec(
        name=name,
        sql=sql,
        category="static-config",
        rationale="more workers, shorter runs",
        kb_refs=("autoscaling",),
        provenance=Provenance(agent="analyzer", backend="offline", prompt_hash="abc"),
    )


def test_a_catalog_round_trips(tmp_path: Path) -> None:
    specs = [_spec(), _spec("last", LAST_RUN)]
    save_catalog(tmp_path, specs)
    assert (tmp_path / "last.sql").read_text() == LAST_RUN.rstrip() + "\n"
    loaded = load_catalog(tmp_path)
    assert [s.feature_id for s in loaded] == [s.feature_id for s in specs]
    assert loaded[0].provenance.prompt_hash == "abc"


def test_editing_the_sql_file_changes_the_feature_id(tmp_path: Path) -> None:
    save_catalog(tmp_path, [_spec()])
    before = load_catalog(tmp_path)[0].feature_id
    (tmp_path / "workers.sql").write_text("SELECT run_id, 2 AS value FROM runs\n")
    assert load_catalog(tmp_path)[0].feature_id != before


def test_duplicate_names_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="duplicate feature names: workers"):
        save_catalog(tmp_path, [_spec(), _spec()])


def test_a_feature_file_header_fills_the_spec(tmp_path: Path) -> None:
    path = tmp_path / "Last-Run.sql"
    path.write_text(LAST_RUN)
    spec = read_feature_file(path)
    assert (spec.name, spec.category) == ("last_duration", "history")
    assert spec.rationale.startswith("the previous finished run")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("-- category: astrology\nSELECT 1", r"category: Input should be"),
        ("-- name: Bad Name\nSELECT 1", r"name: Value error, 'Bad Name' is not a snake_case"),
    ],
)
def test_bad_feature_headers_name_the_file_and_key(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "f.sql"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        read_feature_file(path)


def test_a_broken_catalog_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "catalog.json").write_text("{not json")
    with pytest.raises(ConfigError, match="not a readable feature catalog"):
        load_catalog(tmp_path)


def test_features_list_and_show(tmp_path: Path) -> None:
    save_catalog(tmp_path, [_spec(), _spec("last", LAST_RUN)])
    listed = runner.invoke(app, ["features", "list", "--catalog", str(tmp_path), "--json"])
    assert [r["name"] for r in json.loads(listed.stdout)] == ["workers", "last"]
    shown = runner.invoke(app, ["features", "show", "last", "--catalog", str(tmp_path), "--json"])
    assert json.loads(shown.stdout)["sql"].startswith("-- name: last_duration")
    missing = runner.invoke(app, ["features", "show", "nope", "--catalog", str(tmp_path)])
    assert missing.exit_code == EXIT_USER_ERROR
    assert "no feature named 'nope'" in missing.stderr


FIXTURES = Path(__file__).resolve().parent / "fixtures" / "leakage"


def test_features_check_accepts_and_rejects(gates_warehouse: Path) -> None:
    clean = FIXTURES / "accept_config_total_cores.sql"
    leaky = FIXTURES / "reject_label_duration_ms.sql"
    args = ["features", "check", str(clean), str(leaky), "--db", str(gates_warehouse), "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 1
    verdicts = json.loads(result.stdout)
    assert [v["accepted"] for v in verdicts] == [True, False]
    assert {r["code"] for r in verdicts[1]["reasons"]} >= {"label_leak"}
    assert all(r["gate"] in ("completeness", "leakage") for r in verdicts[1]["reasons"])


def test_features_check_without_a_warehouse_is_a_user_error(tmp_path: Path) -> None:
    path = tmp_path / "f.sql"
    path.write_text(LAST_RUN)
    result = runner.invoke(app, ["features", "check", str(path), "--db", str(tmp_path / "no.db")])
    assert result.exit_code == EXIT_USER_ERROR
    assert "does not exist" in result.stderr


def test_features_check_says_which_gate_was_not_run_and_why(
    gates_warehouse: Path, tmp_path: Path
) -> None:
    path = tmp_path / "deep.sql"
    path.write_text("SELECT run_id, " + "(" * 5000 + "1" + ")" * 5000 + " AS value FROM runs")
    result = runner.invoke(app, ["features", "check", str(path), "--db", str(gates_warehouse)])
    assert result.exit_code == 1
    text = " ".join(result.stdout.split())
    assert "completeness/parse_error: statement nested too deeply to check" in text
    assert "leakage: not run: the completeness gate could not read the SQL" in text


def test_features_check_refuses_a_quadratic_feature_with_its_projected_cost(
    example_warehouse: Path, tmp_path: Path
) -> None:
    path = tmp_path / "ended_before.sql"
    path.write_text(
        "SELECT t.run_id, count(e.run_id) AS value FROM runs AS t "
        "LEFT JOIN runs AS e ON e.end_time < t.submit_time GROUP BY t.run_id"
    )
    args = ["features", "check", str(path), "--db", str(example_warehouse), "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 1
    [verdict] = json.loads(result.stdout)
    [reason] = verdict["reasons"]
    assert (reason["gate"], reason["code"]) == ("cost", "grows_superlinearly")
    assert "at 490 runs" in reason["message"] and "at 4,900" in reason["message"]


def test_features_check_budget_option_reaches_the_cost_gate(
    example_warehouse: Path, tmp_path: Path
) -> None:
    path = tmp_path / "hour.sql"
    path.write_text("SELECT run_id, hour(submit_time) AS value FROM runs")
    base = ["features", "check", str(path), "--db", str(example_warehouse), "--json"]
    assert runner.invoke(app, base).exit_code == 0
    result = runner.invoke(app, [*base, "--feature-budget-seconds", "0"])
    assert result.exit_code == 1
    [verdict] = json.loads(result.stdout)
    assert [r["code"] for r in verdict["reasons"]] == ["over_feature_budget"]
    assert "exceeds the feature budget of 0 ms" in verdict["reasons"][0]["message"]
