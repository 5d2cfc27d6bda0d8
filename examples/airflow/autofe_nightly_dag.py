"""Apache Airflow DAG: run ``autofe nightly`` every night, then log the run history.

Copy this file into the DAGs folder of an Airflow 3 deployment whose workers can run the
``autofe`` command (a path or a venv's ``bin/autofe``) and read the workspace export. It does not
import autofe: the scheduler only parses this file, and autofe runs where the command runs.

Configure it with the DAG params (or, for their defaults, environment variables on the
scheduler): ``workspace`` (``AUTOFE_WORKSPACE``), ``home`` (``AUTOFE_HOME``), ``autofe``
(``AUTOFE_BIN``) and ``margin``. Exit codes of ``autofe nightly`` (docs/nightly.md): 0 done,
2 bad input, 3 done but some workspace files were skipped, 75 another nightly run holds the
lock. 75 marks the task *skipped* (tonight's run is already under way), every other non-zero
code fails it. ``history`` runs whatever happened, so the log always shows the recent nights.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

from airflow.providers.standard.operators.bash import BashOperator
from airflow.sdk import DAG, Param

EXIT_LOCKED = 75

ENV = {
    "AUTOFE_BIN": "{{ params.autofe }}",
    "AUTOFE_WORKSPACE": "{{ params.workspace }}",
    "AUTOFE_HOME": "{{ params.home }}",
    "AUTOFE_MARGIN": "{{ params.margin }}",
    "HF_HUB_OFFLINE": "1",  # the knowledge base's embedding model is read from the local cache
}

NIGHTLY = (
    'exec "$AUTOFE_BIN" nightly --workspace "$AUTOFE_WORKSPACE" --home "$AUTOFE_HOME" '
    '--margin "$AUTOFE_MARGIN"'
)
HISTORY = 'exec "$AUTOFE_BIN" nightly --history --home "$AUTOFE_HOME"'

with DAG(
    dag_id="autofe_nightly",
    description="Ingest new job runs, retrain the runtime model, promote it only if better.",
    schedule="0 2 * * *",
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,  # one night retrains on everything so far: missed nights need no replay
    max_active_runs=1,
    dagrun_timeout=timedelta(hours=3),
    params={
        "workspace": Param(os.environ.get("AUTOFE_WORKSPACE", "/data/databricks-export")),
        "home": Param(os.environ.get("AUTOFE_HOME", "/data/autofe-home")),
        "autofe": Param(os.environ.get("AUTOFE_BIN", "autofe")),
        "margin": Param(0.02, type="number", minimum=0, exclusiveMaximum=1),
    },
    tags=["autofe"],
    doc_md=__doc__,
) as dag:
    nightly = BashOperator(
        task_id="nightly",
        bash_command=NIGHTLY,
        env=ENV,
        append_env=True,
        skip_on_exit_code=EXIT_LOCKED,
        execution_timeout=timedelta(hours=2),
    )
    history = BashOperator(
        task_id="history",
        bash_command=HISTORY,
        env=ENV,
        append_env=True,
        trigger_rule="all_done",
    )
    nightly >> history
