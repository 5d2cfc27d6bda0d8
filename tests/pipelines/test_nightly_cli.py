"""``autofe nightly``'s refusals: each is one line and a documented exit code, and nothing
already in the home folder changes."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest
from nightly_jobs import submit_retraining
from typer.testing import CliRunner

from autofe.cli import app
from autofe.config import EXAMPLE_DIR
from autofe.console import EXIT_LOCKED, EXIT_USER_ERROR
from autofe.scheduler.store import JobStore

runner = CliRunner()


def nightly(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["nightly", *args])
    assert "Traceback" not in result.output
    return result.exit_code, result.output


def test_a_missing_workspace_is_one_line(tmp_path: Path) -> None:
    code, output = nightly("--workspace", str(tmp_path / "nope"), "--home", str(tmp_path / "h"))
    assert code == EXIT_USER_ERROR
    assert f"--workspace {tmp_path / 'nope'}: no such folder" in output
    assert not (tmp_path / "h").exists()  # refused before anything was made


def test_a_folder_that_is_no_workspace_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("not a workspace")
    code, output = nightly("--workspace", str(tmp_path / "notes"), "--home", str(tmp_path / "h"))
    assert code == EXIT_USER_ERROR and "not a workspace export" in output


def test_a_home_that_is_a_file_is_refused_and_kept(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.write_text("precious")
    code, output = nightly("--workspace", str(EXAMPLE_DIR), "--home", str(home))
    assert code == EXIT_USER_ERROR and f"--home {home}: not a folder" in output
    assert home.read_text() == "precious"


def test_the_workspace_is_required_unless_listing_history(tmp_path: Path) -> None:
    code, output = nightly("--home", str(tmp_path))
    assert code == EXIT_USER_ERROR and "--workspace is required" in output
    code, output = nightly("--home", str(tmp_path), "--history", "--json")
    assert code == 0 and json.loads(output) == []


def test_a_margin_outside_zero_to_one_is_refused(tmp_path: Path) -> None:
    args = ("--workspace", str(EXAMPLE_DIR), "--home", str(tmp_path), "--margin", "1.5")
    code, output = nightly(*args)
    assert code == EXIT_USER_ERROR and "--margin 1.5: must be at least 0 and below 1" in output


def test_an_unknown_mode_is_refused(tmp_path: Path) -> None:
    args = ("--workspace", str(EXAMPLE_DIR), "--home", str(tmp_path / "h"), "--mode", "warm")
    code, output = nightly(*args)
    assert code == EXIT_USER_ERROR and "--mode warm: must be one of incremental, full" in output
    assert not (tmp_path / "h").exists()


def listing(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_a_handle_without_a_scheduler_store_is_unknown_and_nothing_is_made(tmp_path: Path) -> None:
    args = ("--workspace", str(EXAMPLE_DIR), "--home", str(tmp_path), "--handle", "abc123")
    code, output = nightly(*args)
    assert code == EXIT_USER_ERROR
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "--handle abc123: no such job (no scheduler store" in errors[0]
    assert listing(tmp_path) == {}  # no store created, no lock, no night folder
    code, output = nightly("--workspace", str(EXAMPLE_DIR), "--home", str(tmp_path / "new"),
                           "--handle", "abc123")  # fmt: skip
    assert code == EXIT_USER_ERROR and "no such job" in output and not (tmp_path / "new").exists()


def test_a_handle_that_is_unknown_or_not_queued_is_one_line_and_the_home_untouched(
    tmp_path: Path,
) -> None:
    handle = submit_retraining(tmp_path)
    before = listing(tmp_path)
    base = ("--workspace", str(EXAMPLE_DIR), "--home", str(tmp_path))
    code, output = nightly(*base, "--handle", "f" * 32)
    assert code == EXIT_USER_ERROR and f"--handle {'f' * 32}: no such job in " in output
    assert listing(tmp_path) == before
    JobStore.in_home(tmp_path).cancel(handle)
    before = listing(tmp_path)
    code, output = nightly(*base, "--handle", handle)
    assert code == EXIT_USER_ERROR
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1
    assert f"--handle {handle}: job 'autofe-nightly' is cancelled" in " ".join(output.split())
    assert listing(tmp_path) == before  # no lock, no night folder, the store as it was
    assert [e.kind for e in JobStore.in_home(tmp_path).get(handle).events] == [
        "submitted", "cancelled"
    ]  # fmt: skip


def test_a_live_lock_exits_with_its_own_code_and_stays(tmp_path: Path) -> None:
    holder = {"pid": os.getpid(), "host": socket.gethostname(), "started": "2026-11-30T02:00:00"}
    lock = tmp_path / "nightly.lock"
    lock.write_text(json.dumps(holder))
    code, output = nightly("--workspace", str(EXAMPLE_DIR), "--home", str(tmp_path))
    assert code == EXIT_LOCKED
    assert "holds the lock" in output and f"pid {os.getpid()} on {holder['host']}" in output
    assert json.loads(lock.read_text()) == holder
    assert not (tmp_path / "nightly").exists()  # no night was started


def test_an_endpoint_that_is_down_is_one_line_saying_to_run_the_night_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The nightly's loop is not resumed by hand: the hint says to run the night again."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{port}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local")
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(var, raising=False)
    home = tmp_path / "home"
    code, output = nightly(
        "--workspace",
        str(EXAMPLE_DIR),
        "--home",
        str(home),
        "--llm",
        "openai",
        "--max-iterations",
        "1",
    )
    assert code == EXIT_USER_ERROR
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "connection failed" in errors[0]
    assert "run `autofe nightly` again" in " ".join(output.split())
    assert "--resume" not in output
