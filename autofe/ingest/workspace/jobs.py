"""Jobs: a job's ``jobs`` row, its tasks' kind and scripts, and the clusters its settings define."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autofe.ingest.workspace.api_values import (
    SOURCE,
    Json,
    dict_of,
    dicts_of,
    epoch_ms,
    utc_time,
)
from autofe.ingest.workspace.catalog import Catalog
from autofe.ingest.workspace.clusters import config_row
from autofe.ingest.workspace.issues import new_issue
from autofe.ingest.workspace.scripts import script_ref
from autofe.schema import IngestIssue

_TASK_KINDS = {
    "notebook_task": "notebook",
    "spark_python_task": "python",
    "python_wheel_task": "python",
    "sql_task": "sql",
    "spark_jar_task": "jar",
    "spark_submit_task": "spark_submit",
    "pipeline_task": "pipeline",
    "dbt_task": "dbt",
    "run_job_task": "run_job",
}


def tasks_of(holder: Mapping[str, Any]) -> list[Json]:
    """Tasks of job settings or a run; Jobs API 2.0 keeps the single task at the top level."""
    tasks = dicts_of(holder.get("tasks"))
    return tasks or ([dict(holder)] if any(k in holder for k in _TASK_KINDS) else [])


def task_kind(task: Mapping[str, Any]) -> str | None:
    """The warehouse task type of one Jobs API task.

    >>> task_kind({"task_key": "t", "spark_python_task": {"python_file": "etl.py"}})
    'python'
    """
    return next((kind for key, kind in _TASK_KINDS.items() if key in task), None)


def _task_type(tasks: Iterable[Mapping[str, Any]]) -> str | None:
    """One kind for a job: its tasks' kind, or ``multi`` when they differ."""
    kinds = {k for t in tasks if (k := task_kind(t))}
    return (kinds.pop() if len(kinds) == 1 else "multi") if kinds else None


@dataclass(frozen=True)
class Script:
    task_key: str
    ref: str
    text: str | None


def scripts_of(cat: Catalog, tasks: Iterable[Mapping[str, Any]]) -> list[Script]:
    return [
        Script(str(task.get("task_key") or ""), ref, cat.script(ref))
        for task in tasks
        if (ref := script_ref(task))
    ]


def script_text(scripts: Sequence[Script]) -> str | None:
    """One task's script as is; several tasks' scripts each under a ``==== task`` header."""
    texts = [s for s in scripts if s.text is not None]
    if len(scripts) == 1:
        return scripts[0].text
    return "\n".join(f"==== task {s.task_key}: {s.ref} ====\n{s.text}" for s in texts) or None


def job_rows(
    job: Json, cat: Catalog, path: Path
) -> tuple[dict[str, list[Json]], list[IngestIssue]]:
    """The jobs row, the cluster configs its settings define, and its scripts not found."""
    settings = dict_of(job.get("settings"))
    tasks = tasks_of(settings)
    scripts = scripts_of(cat, tasks)
    row = {
        "job_id": str(job["job_id"]),
        "name": settings.get("name"),
        "task_type": _task_type(tasks),
        "script_path": scripts[0].ref if scripts else None,
        "script_text": script_text(scripts),
        "definition": json.dumps(settings),
        "created_time": utc_time(epoch_ms(job.get("created_time"))),
        "source": SOURCE,
    }
    specs = [dict_of(c.get("new_cluster")) for c in dicts_of(settings.get("job_clusters"))]
    specs += [dict_of(h.get("new_cluster")) for h in (settings, *tasks)]
    missing = [
        new_issue(path, f"job {row['job_id']}: script {s.ref!r} of task {s.task_key!r} not found")
        for s in scripts
        if s.text is None
    ]
    return {"jobs": [row], "cluster_configs": [config_row(s, cat) for s in specs if s]}, missing
