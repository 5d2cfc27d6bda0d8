"""Apache Airflow DAGs: retrain through autofe's scheduler: triggers, a job, ``autofe nightly``.

Where ``autofe_nightly_dag.py`` runs a night at 02:00 whatever happened, these two DAGs run a
night when autofe's retraining triggers ask for one (docs/nightly.md), as a job of autofe's
scheduler, so every retraining has a tier, a plan, a budget check and a record in
``HOME/scheduler.sqlite``. Deploy one of the two files, not both.

- ``autofe_retraining_schedule`` (daily, 02:00): ``autofe triggers check --home H --scheduled
  --json`` turns the scheduled nightly into a P2 retraining request (once a day, whatever
  reruns; it may be held by the retraining budget).
- ``autofe_retraining`` (every 15 minutes, one run at a time): ``check`` runs ``autofe
  triggers check --home H --json`` (degradation fires P0, drift and skew P1; ``autofe serve``
  also checks after every reported actual) and reads the open request from its JSON; ``run``
  then runs the queued request's ``command`` with its handle, ``autofe nightly --home H
  --workspace W --mode M --handle HANDLE``, which reports started, then succeeded or failed,
  to the scheduler's store. The command is the home's own (``autofe`` replaced by the
  ``autofe`` param, the DAG's ``margin`` added, and the ``workspace`` param when the home has
  no night yet); ``check`` refuses anything but an ``autofe nightly`` command. A request held
  by the budget is logged and ``run`` succeeds without running anything: the next check tries
  it again. With nothing queued (none open, or it is already running) ``run`` is skipped.

Like ``autofe_nightly_dag.py`` the file does not import autofe: it only runs the ``autofe``
command on the workers and parses its JSON with the standard library. Configure it with the DAG
params (or, for their defaults, environment variables on the scheduler): ``workspace``
(``AUTOFE_WORKSPACE``), ``home`` (``AUTOFE_HOME``), ``autofe`` (``AUTOFE_BIN``) and ``margin``.

Exit codes. ``autofe triggers check``: 0 checked, 2 bad input (``--home`` not a folder, wrong
trigger settings; one line on stderr): any non-zero code fails the task with that line.
``autofe nightly`` (docs/nightly.md): 0 done, 2 bad input (also a handle no longer queued), 3
done but some workspace files were skipped, 75 another nightly run holds the lock. 75 skips
``run`` (the request stays queued: the next check runs it), every other non-zero code fails it
(the night has reported the job failed). ``run`` exits 99, BashOperator's skip code, when there
is nothing to run.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import subprocess
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.providers.standard.operators.bash import BashOperator
from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG, Param
from airflow.sdk.exceptions import AirflowException

EXIT_LOCKED = 75
EXIT_NOTHING = 99  # BashOperator's default skip_on_exit_code

log = logging.getLogger(__name__)


def params(*names: str) -> dict[str, Param]:
    """Fresh DAG params (each DAG owns its own) of these names."""
    every = {
        "workspace": Param(os.environ.get("AUTOFE_WORKSPACE", "/data/databricks-export")),
        "home": Param(os.environ.get("AUTOFE_HOME", "/data/autofe-home")),
        "autofe": Param(os.environ.get("AUTOFE_BIN", "autofe")),
        "margin": Param(0.02, type="number", minimum=0, exclusiveMaximum=1),
    }
    return {name: every[name] for name in names}


OFFLINE = {"HF_HUB_OFFLINE": "1"}  # the knowledge base's embedding model is read from the cache

REQUEST_NIGHTLY = 'exec "$AUTOFE_BIN" triggers check --home "$AUTOFE_HOME" --scheduled --json'
RUN = f"""
if [ -n "$AUTOFE_COMMAND" ]; then eval "exec $AUTOFE_COMMAND"; fi
if [ -n "$AUTOFE_HELD" ]; then
  echo "retraining held: $AUTOFE_HELD (the next check tries it again)"; exit 0
fi
echo "no retraining queued"; exit {EXIT_NOTHING}
"""


def check_triggers(autofe: str, home: str, workspace: str, margin: str) -> dict[str, str]:
    """Run ``autofe triggers check --json`` and say what ``run`` does: the queued request's
    shell command, or the held request's reason, or neither (both empty)."""
    answer = subprocess.run(
        [autofe, "triggers", "check", "--home", home, "--json"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **OFFLINE},
    )
    if answer.returncode != 0:
        last = (answer.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise AirflowException(f"autofe triggers check: exit code {answer.returncode}: {last}")
    status = json.loads(answer.stdout)
    for firing in status.get("fired", []):
        log.info(
            "fired: %s (%s, %s): %s -> %s",
            *(firing.get(key) for key in ("kind", "tier", "mode", "reason", "action")),
        )
    return next_step(status, autofe, workspace, margin)


def next_step(status: dict[str, Any], autofe: str, workspace: str, margin: str) -> dict[str, str]:
    """The open request's command when it is queued; a running one is left alone (the lock
    would refuse a second night anyway), a held one is reported for ``run`` to log."""
    opened, held = status.get("open"), status.get("held")
    if opened and opened.get("state") == "queued":
        log.info("retraining %s queued: %s", opened["handle"], opened.get("plan"))
        return {"command": command_line(opened, autofe, workspace, margin), "held": ""}
    if opened:
        log.info("retraining %s is %s: nothing to start", opened["handle"], opened.get("state"))
    elif held:
        reason = f"{held.get('tier')} {held.get('mode')}: {held.get('reason')}"
        log.warning("retraining held: %s", reason)
        return {"command": "", "held": reason}
    return {"command": "", "held": ""}


def command_line(opened: dict[str, Any], autofe: str, workspace: str, margin: str) -> str:
    """The request's ``autofe nightly`` command, shell-quoted, for this worker and handle."""
    argv = shlex.split(opened.get("command") or "")
    if argv[:2] != ["autofe", "nightly"] or "HANDLE" not in argv:
        raise AirflowException(f"retraining {opened['handle']}: not a nightly command: {argv}")
    argv = [autofe, *(opened["handle"] if arg == "HANDLE" else arg for arg in argv[1:])]
    if "--workspace" not in argv:  # the home has no night yet to take the workspace from
        argv += ["--workspace", workspace]
    if "--margin" not in argv:
        argv += ["--margin", margin]
    return shlex.join(argv)


with DAG(
    dag_id="autofe_retraining_schedule",
    description="Request the day's scheduled (P2) retraining from autofe's scheduler.",
    schedule="0 2 * * *",
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,  # one night retrains on everything so far: missed days need no request
    max_active_runs=1,
    params=params("home", "autofe"),
    tags=["autofe"],
    doc_md=__doc__,
) as schedule_dag:
    BashOperator(
        task_id="request_nightly",
        bash_command=REQUEST_NIGHTLY,
        env={"AUTOFE_BIN": "{{ params.autofe }}", "AUTOFE_HOME": "{{ params.home }}", **OFFLINE},
        append_env=True,
        execution_timeout=timedelta(minutes=10),
    )

with DAG(
    dag_id="autofe_retraining",
    description="Check the retraining triggers; run the queued retraining as autofe nightly.",
    schedule=timedelta(minutes=15),
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,  # a check sees everything so far: missed checks need no replay
    max_active_runs=1,  # one runner, so a queued request is started once
    dagrun_timeout=timedelta(hours=3),
    params=params("workspace", "home", "autofe", "margin"),
    tags=["autofe"],
    doc_md=__doc__,
) as retraining_dag:
    check = PythonOperator(
        task_id="check",
        python_callable=check_triggers,
        op_kwargs={
            "autofe": "{{ params.autofe }}",
            "home": "{{ params.home }}",
            "workspace": "{{ params.workspace }}",
            "margin": "{{ params.margin }}",
        },
        execution_timeout=timedelta(minutes=10),
    )
    run = BashOperator(
        task_id="run",
        bash_command=RUN,
        env={
            "AUTOFE_COMMAND": "{{ ti.xcom_pull(task_ids='check')['command'] }}",
            "AUTOFE_HELD": "{{ ti.xcom_pull(task_ids='check')['held'] }}",
            **OFFLINE,
        },
        append_env=True,
        skip_on_exit_code=[EXIT_NOTHING, EXIT_LOCKED],
        execution_timeout=timedelta(hours=2),
    )
    check >> run
