"""The Airflow DAGs in ``examples/airflow``: they parse, their tasks are wired, and their
commands call ``autofe nightly`` and ``autofe triggers check`` as documented (run against a stub
``autofe`` that records its arguments and answers the check with a canned JSON).

Needs Apache Airflow, which is not in autofe's venv (it would downgrade fastapi): ``make
test-airflow`` builds ``.venv-airflow`` and runs this file there, without autofe installed.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import os
import shlex
import stat
import sys
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

if importlib.util.find_spec("airflow") is not None:
    # Airflow reads AIRFLOW_HOME when imported and writes logs there: never the user's ~/airflow
    os.environ.setdefault("AIRFLOW_HOME", str(Path(tempfile.gettempdir()) / "autofe-airflow-home"))
pytest.importorskip("airflow")

DAG_DIR = Path(__file__).resolve().parents[2] / "examples" / "airflow"
DAG_FILES = [DAG_DIR / "autofe_nightly_dag.py", DAG_DIR / "autofe_retraining_dag.py"]
# records each call's arguments per subcommand (autofe.nightly.args, autofe.triggers.args); the
# check prints the canned answer in autofe.answer, or an error line when STUB_CHECK_EXIT is set
STUB = """#!/bin/sh
for arg in "$@"; do echo "$arg"; done > "$0.$1.args"
echo "HF_HUB_OFFLINE=$HF_HUB_OFFLINE" >> "$0.$1.args"
if [ "$1" = triggers ]; then
  [ -z "$STUB_CHECK_EXIT" ] || { echo "error: --home: not a folder" >&2; exit "$STUB_CHECK_EXIT"; }
  cat "$0.answer"; exit 0
fi
exit "${STUB_EXIT:-0}"
"""
HANDLE = "39d90dfa258e44d5aaedbbebcad2f191"


@pytest.fixture(scope="module")
def bag() -> Any:
    dagbag = importlib.import_module("airflow.dag_processing.dagbag")
    bag = dagbag.DagBag(dag_folder=str(DAG_DIR))
    assert bag.import_errors == {}
    assert sorted(bag.dags) == ["autofe_nightly", "autofe_retraining", "autofe_retraining_schedule"]
    return bag


@pytest.fixture(scope="module")
def dag(bag: Any) -> Any:
    return bag.dags["autofe_nightly"]


@pytest.fixture(scope="module")
def retraining(bag: Any) -> Any:
    return bag.dags["autofe_retraining"]


@pytest.mark.parametrize("path", DAG_FILES, ids=lambda path: path.name)
def test_the_dags_parse_without_autofe(bag: Any, path: Path) -> None:
    tree = ast.parse(path.read_text())
    imported = {
        name.split(".")[0]
        for node in ast.walk(tree)
        for name in (
            [node.module or ""] if isinstance(node, ast.ImportFrom) else
            [a.name for a in node.names] if isinstance(node, ast.Import) else []
        )
    }  # fmt: skip
    assert "autofe" not in imported and "autofe" not in sys.modules
    for dag in bag.dags.values():
        assert dag.catchup is False and dag.max_active_runs == 1
    assert bag.dags["autofe_nightly"].schedule == "0 2 * * *"
    assert bag.dags["autofe_retraining_schedule"].schedule == "0 2 * * *"
    assert bag.dags["autofe_retraining"].schedule == timedelta(minutes=15)


def test_history_follows_the_night_whatever_happened(dag: Any) -> None:
    assert set(dag.task_ids) == {"nightly", "history"}
    nightly, history = dag.get_task("nightly"), dag.get_task("history")
    assert nightly.upstream_task_ids == set() and nightly.downstream_task_ids == {"history"}
    assert history.upstream_task_ids == {"nightly"} and history.downstream_task_ids == set()
    assert history.trigger_rule == "all_done"
    assert list(nightly.skip_on_exit_code) == [75]  # another run holds the lock: skipped


class XComs:
    """The ``ti`` a rendered template sees: ``xcom_pull`` gives what an earlier task returned."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}

    def xcom_pull(self, task_ids: str) -> Any:
        return self.values[task_ids]


def run_task(dag: Any, task_id: str, tmp_path: Path, code: int = 0, ti: XComs | None = None) -> Any:
    """Render a fresh copy of the task with params pointing at a stub ``autofe`` and run it;
    its return value goes to ``ti`` (the XCom a later task pulls)."""
    stub = tmp_path / "autofe"
    stub.write_text(STUB)
    stub.chmod(stub.stat().st_mode | stat.S_IXUSR)
    task = dag.get_task(task_id).prepare_for_execution()
    params = {"workspace": str(tmp_path / "my workspace"), "home": str(tmp_path / "home")}
    context = {"params": {**params, "autofe": str(stub), "margin": 0.05}, "ti": ti or XComs()}
    task.render_template_fields(context)
    os.environ["STUB_EXIT"] = str(code)
    try:
        value = task.execute(context)
    finally:
        del os.environ["STUB_EXIT"]
    if ti is not None:
        ti.values[task_id] = value
    return value


def args_of(tmp_path: Path, command: str = "nightly") -> list[str] | None:
    """The arguments of the stub's last ``autofe <command>`` call, None when never called."""
    path = tmp_path / f"autofe.{command}.args"
    return path.read_text().splitlines() if path.exists() else None


def test_the_nightly_command(dag: Any, tmp_path: Path) -> None:
    run_task(dag, "nightly", tmp_path)
    assert args_of(tmp_path) == [
        "nightly",
        "--workspace",
        str(tmp_path / "my workspace"),  # a space survives: the paths are quoted
        "--home",
        str(tmp_path / "home"),
        "--margin",
        "0.05",
        "HF_HUB_OFFLINE=1",
    ]


def test_a_locked_night_is_skipped_and_a_failed_one_fails(dag: Any, tmp_path: Path) -> None:
    exceptions = importlib.import_module("airflow.sdk.exceptions")
    with pytest.raises(exceptions.AirflowSkipException):
        run_task(dag, "nightly", tmp_path, code=75)
    with pytest.raises(exceptions.AirflowException, match="exit code 2"):
        run_task(dag, "nightly", tmp_path, code=2)


def test_the_history_command(dag: Any, tmp_path: Path) -> None:
    run_task(dag, "history", tmp_path)
    assert args_of(tmp_path) == [
        "nightly",
        "--history",
        "--home",
        str(tmp_path / "home"),
        "HF_HUB_OFFLINE=1",
    ]


def test_the_retraining_dags_tasks(bag: Any, retraining: Any) -> None:
    assert set(bag.dags["autofe_retraining_schedule"].task_ids) == {"request_nightly"}
    assert set(retraining.task_ids) == {"check", "run"}
    check, run = retraining.get_task("check"), retraining.get_task("run")
    assert check.upstream_task_ids == set() and check.downstream_task_ids == {"run"}
    assert run.upstream_task_ids == {"check"} and run.downstream_task_ids == set()
    assert run.trigger_rule == "all_success"  # a failed check runs nothing
    assert sorted(run.skip_on_exit_code) == [75, 99]  # locked, nothing to run: skipped


def test_the_daily_dag_requests_the_scheduled_retraining(bag: Any, tmp_path: Path) -> None:
    run_task(bag.dags["autofe_retraining_schedule"], "request_nightly", tmp_path)
    home = str(tmp_path / "home")
    assert args_of(tmp_path, "triggers") == [
        *("triggers", "check", "--home", home, "--scheduled", "--json", "HF_HUB_OFFLINE=1")
    ]
    assert args_of(tmp_path) is None


def status(tmp_path: Path, state: str | None, command: str | None = None) -> dict[str, Any]:
    """A ``triggers check --json`` answer: a degradation fired, the request ``state`` (None:
    held by the budget, "": nothing open); the command as ``autofe`` writes it."""
    workspace = tmp_path / "last night's workspace"
    line = shlex.join(["autofe", "nightly", "--home", str(tmp_path / "home")])
    line += f" --workspace {shlex.quote(str(workspace))} --mode full --handle HANDLE"
    fired = {"kind": "degradation", "tier": "P0", "mode": "full", "action": "submitted"}
    opened = {"handle": HANDLE, "state": state, "tier": "P0", "mode": "full"}
    held = {"tier": "P2", "mode": "incremental", "reason": "budget 'retraining' has $0.40 left"}
    return {
        "fired": [{**fired, "reason": "rolling MAPE 0.41 above 0.22 + 0.10", "handle": HANDLE}],
        "open": {**opened, "plan": "c4.2xlarge x2", "command": command or line} if state else None,
        "held": held if state is None else None,
    }


def retrain(dag: Any, tmp_path: Path, answer: dict[str, Any], code: int = 0) -> Any:
    """One run of the retraining DAG: ``check`` against the canned answer, then ``run``."""
    (tmp_path / "autofe.answer").write_text(json.dumps(answer, indent=2))
    ti = XComs()
    run_task(dag, "check", tmp_path, ti=ti)
    home = str(tmp_path / "home")
    assert args_of(tmp_path, "triggers") == [
        *("triggers", "check", "--home", home, "--json", "HF_HUB_OFFLINE=1")
    ]
    return run_task(dag, "run", tmp_path, code, ti=ti)


def test_a_queued_request_runs_its_nightly_with_its_handle(retraining: Any, tmp_path: Path) -> None:
    retrain(retraining, tmp_path, status(tmp_path, "queued"))
    assert args_of(tmp_path) == [
        *("nightly", "--home", str(tmp_path / "home")),
        *("--workspace", str(tmp_path / "last night's workspace"), "--mode", "full"),
        *("--handle", HANDLE, "--margin", "0.05", "HF_HUB_OFFLINE=1"),
    ]


def test_a_first_night_takes_the_workspace_param(retraining: Any, tmp_path: Path) -> None:
    command = f"autofe nightly --home {tmp_path / 'home'} --mode incremental --handle HANDLE"
    retrain(retraining, tmp_path, status(tmp_path, "queued", command))
    assert args_of(tmp_path) == [
        *("nightly", "--home", str(tmp_path / "home"), "--mode", "incremental"),
        *("--handle", HANDLE, "--workspace", str(tmp_path / "my workspace")),
        *("--margin", "0.05", "HF_HUB_OFFLINE=1"),
    ]


def test_a_held_request_runs_nothing_and_succeeds(retraining: Any, tmp_path: Path) -> None:
    last_line = retrain(retraining, tmp_path, status(tmp_path, None))
    assert last_line == (
        "retraining held: P2 incremental: budget 'retraining' has $0.40 left "
        "(the next check tries it again)"
    )
    assert args_of(tmp_path) is None


@pytest.mark.parametrize("state", ["", "running"])
def test_nothing_queued_skips_the_run(retraining: Any, tmp_path: Path, state: str) -> None:
    exceptions = importlib.import_module("airflow.sdk.exceptions")
    with pytest.raises(exceptions.AirflowSkipException):
        retrain(retraining, tmp_path, status(tmp_path, state))
    assert args_of(tmp_path) is None


def test_a_locked_retraining_is_skipped_and_a_failed_one_fails(
    retraining: Any, tmp_path: Path
) -> None:
    exceptions = importlib.import_module("airflow.sdk.exceptions")
    with pytest.raises(exceptions.AirflowSkipException):
        retrain(retraining, tmp_path, status(tmp_path, "queued"), code=75)
    assert args_of(tmp_path) is not None  # it ran and found the lock held
    with pytest.raises(exceptions.AirflowException, match="exit code 2"):
        retrain(retraining, tmp_path, status(tmp_path, "queued"), code=2)


def test_a_failed_check_or_a_foreign_command_fails_the_check(
    retraining: Any, tmp_path: Path
) -> None:
    exceptions = importlib.import_module("airflow.sdk.exceptions")
    os.environ["STUB_CHECK_EXIT"] = "2"
    try:
        with pytest.raises(exceptions.AirflowException, match="exit code 2: error: --home"):
            retrain(retraining, tmp_path, status(tmp_path, "queued"))
    finally:
        del os.environ["STUB_CHECK_EXIT"]
    foreign = f"touch {tmp_path / 'ran'} --handle HANDLE"
    with pytest.raises(exceptions.AirflowException, match="not a nightly command"):
        retrain(retraining, tmp_path, status(tmp_path, "queued", foreign))
    assert args_of(tmp_path) is None and not (tmp_path / "ran").exists()
