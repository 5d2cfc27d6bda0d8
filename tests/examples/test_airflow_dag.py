"""The Airflow DAG in ``examples/airflow``: it parses, its tasks are wired, and its commands
call ``autofe nightly`` as documented (run against a stub ``autofe`` that records its arguments).

Needs Apache Airflow, which is not in autofe's venv (it would downgrade fastapi): ``make
test-airflow`` builds ``.venv-airflow`` and runs this file there, without autofe installed.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

if importlib.util.find_spec("airflow") is not None:
    # Airflow reads AIRFLOW_HOME when imported and writes logs there: never the user's ~/airflow
    os.environ.setdefault("AIRFLOW_HOME", str(Path(tempfile.gettempdir()) / "autofe-airflow-home"))
pytest.importorskip("airflow")

DAG_DIR = Path(__file__).resolve().parents[2] / "examples" / "airflow"
DAG_FILE = DAG_DIR / "autofe_nightly_dag.py"
STUB = """#!/bin/sh
for arg in "$@"; do echo "$arg"; done > "$0.args"
echo "HF_HUB_OFFLINE=$HF_HUB_OFFLINE" >> "$0.args"
exit "${STUB_EXIT:-0}"
"""


@pytest.fixture(scope="module")
def dag() -> Any:
    dagbag = importlib.import_module("airflow.dag_processing.dagbag")
    bag = dagbag.DagBag(dag_folder=str(DAG_DIR))
    assert bag.import_errors == {}
    assert list(bag.dags) == ["autofe_nightly"]
    return bag.dags["autofe_nightly"]


def test_the_dag_parses_without_autofe(dag: Any) -> None:
    tree = ast.parse(DAG_FILE.read_text())
    imported = {
        name.split(".")[0]
        for node in ast.walk(tree)
        for name in (
            [node.module or ""] if isinstance(node, ast.ImportFrom) else
            [a.name for a in node.names] if isinstance(node, ast.Import) else []
        )
    }  # fmt: skip
    assert "autofe" not in imported and "autofe" not in sys.modules
    assert dag.schedule == "0 2 * * *" and dag.catchup is False and dag.max_active_runs == 1


def test_history_follows_the_night_whatever_happened(dag: Any) -> None:
    assert set(dag.task_ids) == {"nightly", "history"}
    nightly, history = dag.get_task("nightly"), dag.get_task("history")
    assert nightly.upstream_task_ids == set() and nightly.downstream_task_ids == {"history"}
    assert history.upstream_task_ids == {"nightly"} and history.downstream_task_ids == set()
    assert history.trigger_rule == "all_done"
    assert list(nightly.skip_on_exit_code) == [75]  # another run holds the lock: skipped


def run_task(dag: Any, task_id: str, tmp_path: Path, code: int = 0) -> list[str]:
    """Render the task with params pointing at a stub ``autofe`` and run its command."""
    stub = tmp_path / "autofe"
    stub.write_text(STUB)
    stub.chmod(stub.stat().st_mode | stat.S_IXUSR)
    task = dag.get_task(task_id)
    params = {"workspace": str(tmp_path / "my workspace"), "home": str(tmp_path / "home")}
    context = {"params": {**params, "autofe": str(stub), "margin": 0.05}}
    task.render_template_fields(context)
    os.environ["STUB_EXIT"] = str(code)
    try:
        task.execute(context)
    finally:
        del os.environ["STUB_EXIT"]
    return (tmp_path / "autofe.args").read_text().splitlines()


def test_the_nightly_command(dag: Any, tmp_path: Path) -> None:
    args = run_task(dag, "nightly", tmp_path)
    assert args == [
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
    args = run_task(dag, "history", tmp_path)
    assert args[:-1] == ["nightly", "--history", "--home", str(tmp_path / "home")]
