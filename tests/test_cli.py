from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from autofe import __version__
from autofe.cli import app
from autofe.config import example_workspace
from autofe.console import EXIT_PARTIAL, EXIT_USER_ERROR

runner = CliRunner()


def test_version_json() -> None:
    result = runner.invoke(app, ["version", "--json"])
    assert result.exit_code == 0
    assert json.loads(result.stdout) == {"version": __version__}


def test_schema_json_lists_availability_tags() -> None:
    result = runner.invoke(app, ["warehouse", "schema", "--json"])
    records = json.loads(result.stdout)
    label = next(r for r in records if (r["table"], r["column"]) == ("runs", "duration_s"))
    assert label["availability"] == "post_execution"


def test_ingest_json_summary_and_stats(tmp_path: Path, eventlogs: Path) -> None:
    db = tmp_path / "w.duckdb"
    log = eventlogs / "sparklens" / "local-1532512550423"
    result = runner.invoke(app, ["ingest", str(log), "--db", str(db), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["applications"] == 1
    assert (summary["stages"], summary["tasks"]) == (2, 8)
    assert summary["files_skipped"] == []
    assert summary["seconds"] > 0
    stats = json.loads(runner.invoke(app, ["warehouse", "stats", "--db", str(db), "--json"]).stdout)
    assert stats["applications"] == 1
    assert stats["runs"] == 1


def test_ingest_reports_a_missing_path_and_keeps_the_rest(tmp_path: Path, eventlogs: Path) -> None:
    db = tmp_path / "w.duckdb"
    good = eventlogs / "dr-elephant" / "event_log_1"
    missing = tmp_path / "nope.zstd"
    result = runner.invoke(app, ["ingest", str(missing), str(good), "--db", str(db), "--json"])
    assert result.exit_code == EXIT_PARTIAL
    summary = json.loads(result.stdout)
    assert summary["applications"] == 1
    assert summary["files_skipped"] == [
        {"path": str(missing), "line": None, "reason": "no such file or directory", "fatal": True}
    ]


def test_user_error_is_one_line_without_traceback(tmp_path: Path, eventlogs: Path) -> None:
    bogus = tmp_path / "w.duckdb"
    bogus.write_text("this is not a database\n" * 50)
    result = runner.invoke(app, ["ingest", str(eventlogs / "sparklens"), "--db", str(bogus)])
    assert result.exit_code == EXIT_USER_ERROR
    assert "Traceback" not in result.output
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1
    assert lines[0].startswith("error: cannot open warehouse")
    assert bogus.read_text().startswith("this is not a database")


def test_reingest_adds_nothing(tmp_path: Path, eventlogs: Path) -> None:
    db = tmp_path / "w.duckdb"
    src = tmp_path / "logs"
    shutil.copytree(eventlogs / "sparklint", src)
    first = json.loads(runner.invoke(app, ["ingest", str(src), "--db", str(db), "--json"]).stdout)
    again = json.loads(runner.invoke(app, ["ingest", str(src), "--db", str(db), "--json"]).stdout)
    assert first["applications"] == 2
    assert (again["applications"], again["files_unchanged"]) == (0, 2)


MAPPINGS = Path(__file__).resolve().parents[1] / "examples" / "mappings"


def test_ingest_routes_mapping_files_and_tables(tmp_path: Path, external: Path) -> None:
    db = tmp_path / "w.duckdb"
    toml = MAPPINGS / "cherrypick.toml"
    first = runner.invoke(app, ["ingest", str(toml), "--db", str(db), "--json"])
    assert json.loads(first.stdout)["runs"] == 291
    head = (external / "cherrypick" / "CP_tpch.csv").read_text().splitlines()[:4]
    table = tmp_path / "CP_tpch_first3.csv"
    table.write_text("\n".join(head) + "\n")
    fresh = tmp_path / "fresh.duckdb"
    args = ["ingest", str(table), "--mapping", str(toml), "--db", str(fresh), "--json"]
    assert json.loads(runner.invoke(app, args).stdout)["runs"] == 3


def test_ingest_without_paths_reads_the_example_workspace(tmp_path: Path) -> None:
    db = tmp_path / "w.duckdb"
    result = runner.invoke(app, ["ingest", "--db", str(db), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    shipped = len(list((example_workspace() / "runs").glob("*.json")))
    assert summary["runs"] == shipped >= 400
    assert summary["applications"] == shipped  # every run's event log, linked
    assert summary["files_skipped"] == [] and summary["issues"] == []


def test_a_warehouse_path_under_a_file_is_one_clear_error(tmp_path: Path, eventlogs: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    db = blocker / "sub" / "w.duckdb"
    result = runner.invoke(app, ["ingest", str(eventlogs / "sparklens"), "--db", str(db)])
    assert result.exit_code == EXIT_USER_ERROR
    assert result.stderr.strip().startswith(f"error: cannot open warehouse {db}")
    assert "Traceback" not in result.output


def test_a_bad_mapping_is_one_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('source = "x"\nfiles = "t.csv"\n[label]\ncolumn = "time"\nunit = "fortnights"\n')
    result = runner.invoke(app, ["ingest", str(bad), "--db", str(tmp_path / "w.duckdb")])
    assert result.exit_code == EXIT_USER_ERROR
    assert str(bad) in result.stderr
    assert "Traceback" not in result.output


def _edited_log(eventlogs: Path, dest: Path) -> int:
    """A real log whose first JobStart says "yesterday" for its submission time; its line."""
    lines = (eventlogs / "sparklens" / "local-1532512550423").read_bytes().splitlines()
    at = next(i for i, line in enumerate(lines) if b'"SparkListenerJobStart"' in line)
    event = json.loads(lines[at])
    event["Submission Time"] = "yesterday"
    lines[at] = json.dumps(event).encode()
    dest.write_bytes(b"\n".join(lines) + b"\n")
    return at + 1


def test_a_wrongly_typed_field_skips_its_log_and_exits_3(tmp_path: Path, eventlogs: Path) -> None:
    good, good2 = eventlogs / "dr-elephant" / "event_log_1", eventlogs / "sparklint"
    bad = tmp_path / "bad"
    line = _edited_log(eventlogs, bad)
    db = str(tmp_path / "w.duckdb")
    result = runner.invoke(app, ["ingest", str(good), str(bad), str(good2), "--db", db])
    assert result.exit_code == EXIT_PARTIAL, result.output
    assert "Traceback" not in result.output
    assert result.stderr.splitlines() == [
        f"skipped: {bad}:{line}: SparkListenerJobStart field 'Submission Time' is not epoch "
        "milliseconds: 'yesterday'; log not ingested"
    ]
    stats = json.loads(runner.invoke(app, ["warehouse", "stats", "--db", db, "--json"]).stdout)
    assert stats["applications"] == 3  # event_log_1 and sparklint's two


def test_a_folder_without_logs_is_a_warning_and_alone_exits_3(
    tmp_path: Path, eventlogs: Path
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.md").write_text("not a log\n")
    db = str(tmp_path / "w.duckdb")
    alone = runner.invoke(app, ["ingest", str(empty), "--db", db])
    assert alone.exit_code == EXIT_PARTIAL
    warning = f"warning: {empty}: no event logs in this folder"
    assert alone.stderr.splitlines()[0].startswith(warning)
    assert alone.stderr.splitlines()[1].startswith("nothing ingested: ")
    good = eventlogs / "dr-elephant" / "event_log_1"
    mixed = runner.invoke(app, ["ingest", str(empty), str(good), "--db", db, "--json"])
    assert mixed.exit_code == 0
    summary = json.loads(mixed.stdout)
    assert (summary["applications"], summary["files_skipped"]) == (1, [])
    assert [i["path"] for i in summary["issues"]] == [str(empty)]


def test_a_run_table_whose_every_row_is_refused_exits_3(tmp_path: Path) -> None:
    table = tmp_path / "runs.csv"
    table.write_text("#Cores,Input Fraction,Time (s)\n4,0.5,n/a\n8,0.5,-3\n16,0.5,\n")
    mapping = tmp_path / "m.toml"
    mapping.write_text(
        'source = "t"\nfiles = "runs.csv"\n[job_id]\nconstant = "lr"\n'
        '[label]\ncolumn = "Time (s)"\nunit = "s"\n'
        '[attributes]\nknown_at_submit = ["#Cores", "Input Fraction"]\n'
    )
    db = str(tmp_path / "w.duckdb")
    result = runner.invoke(app, ["ingest", str(mapping), "--db", db, "--json"])
    assert result.exit_code == EXIT_PARTIAL
    summary = json.loads(result.stdout)
    assert summary["runs"] == 0
    assert summary["files_skipped"] == [
        {
            "path": str(table),
            "line": None,
            "reason": "no run ingested: all 3 rows were refused (first, line 2: label column "
            "'Time (s)' is not a number: 'n/a')",
            "fatal": True,
        }
    ]
    assert [(i["line"], i["fatal"]) for i in summary["issues"]][:3] == [
        (2, False),
        (3, False),
        (4, False),
    ]
    again = runner.invoke(app, ["ingest", str(mapping), "--db", db, "--json"])
    assert again.exit_code == EXIT_PARTIAL  # not recorded as ingested: refused again
