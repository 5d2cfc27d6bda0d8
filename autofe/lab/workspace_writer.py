"""Write the workspace files of a lab run in the shapes the Databricks APIs return.

Every file is written to a temporary name and renamed, so an interrupted ``generate`` never
leaves half a JSON file behind; ``runs/<run_id>.json`` is written last for a run, which makes
its presence the mark of a finished run.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from autofe.json_file import write_json as write_atomic
from autofe.lab.clock import CALENDAR_START
from autofe.lab.configs import cluster_spec, node_types_json
from autofe.lab.plan import LabJobLike, RunSpec
from autofe.lab.runner import Outcome

DRIVER_IP = "10_139_0_4"


def write_json(path: Path, content: Any) -> None:
    """Compact JSON, as the REST API returns it (folders made as needed), written atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, content, compact=True)


def cluster_id(spec: RunSpec) -> str:
    """A job cluster id in Databricks' ``MMDD-HHMMSS-xxxxxxxx`` shape, from the virtual time.

    >>> import time; len("0301-020000-abcdefgh")
    20
    """
    from datetime import UTC, datetime

    when = datetime.fromtimestamp(spec.submit_ms / 1000, UTC)
    digest = hashlib.sha256(f"cluster:{spec.run_id}".encode()).hexdigest()[:8]
    return f"{when:%m%d-%H%M%S}-{digest}"


def spark_context_id(spec: RunSpec) -> int:
    """A 19-digit Spark context id, stable per run."""
    digest = hashlib.sha256(f"context:{spec.run_id}".encode()).digest()
    return 10**18 + int.from_bytes(digest[:8]) % (9 * 10**18)


def event_log_dir(root: Path, spec: RunSpec) -> Path:
    """``cluster-logs/<cluster_id>/eventlog/<cluster_id>_<ip>/<spark_context_id>``."""
    cid = cluster_id(spec)
    return (
        root
        / "cluster-logs"
        / cid
        / "eventlog"
        / f"{cid}_{DRIVER_IP}"
        / str(spark_context_id(spec))
    )


def script_ref(job: LabJobLike, version: int = 0) -> str:
    """The workspace path of a job's script (``version`` k ≥ 1: its k-th variant).

    SQL jobs are SQL notebooks (exported with ``.sql``: ``scripts/lab/<name>[.vN].sql``),
    PySpark jobs Python files (``scripts/lab/<name>[_vN].py``).
    """
    if job.kind == "pyspark":
        return f"/Workspace/lab/{job.name}" + (f"_v{version + 1}" if version else "") + ".py"
    return f"/Workspace/lab/{job.name}" + (f".v{version + 1}" if version else "")


def _script_file(root: Path, job: LabJobLike, version: int) -> Path:
    name = script_ref(job, version).removeprefix("/Workspace/lab/")
    return root / "scripts" / "lab" / (name if job.kind == "pyspark" else f"{name}.sql")


def _task(job: LabJobLike, version: int = 0) -> dict[str, Any]:
    if job.kind == "pyspark":
        return {"task_key": "main", "spark_python_task": {"python_file": script_ref(job, version)}}
    return {"task_key": "main", "notebook_task": {"notebook_path": script_ref(job, version)}}


def write_static(root: Path, jobs: dict[int, LabJobLike]) -> None:
    """``jobs/list.json``, ``scripts/lab/*`` and ``node_types.json``."""
    created = int(CALENDAR_START.timestamp() * 1000) - 7 * 86_400_000
    listing = []
    for job_id, job in sorted(jobs.items()):
        for version, text in enumerate((job.script, *job.variants)):
            target = _script_file(root, job, version)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        settings = {
            "name": job.name,
            "format": "SINGLE_TASK",
            "tasks": [_task(job)],
            "tags": {"lab_schedule": job.schedule, "lab_tables": ",".join(job.tables)},
        }
        listing.append({"job_id": job_id, "created_time": created, "settings": settings})
    write_json(root / "jobs" / "list.json", {"jobs": listing, "has_more": False})
    write_json(root / "node_types.json", node_types_json())


def _parameters(spec: RunSpec) -> dict[str, Any]:
    if spec.job.kind == "pyspark":
        return {"python_params": [x for k, v in spec.params.items() for x in (f"--{k}", v)]}
    return {"notebook_params": dict(spec.params)}


def write_run(root: Path, spec: RunSpec, outcome: Outcome) -> None:
    """``clusters/<cluster_id>.json``, then ``runs/<run_id>.json`` (the run's done mark)."""
    cid, context = cluster_id(spec), spark_context_id(spec)
    spec_json = cluster_spec(spec.config)
    execution_start = spec.submit_ms + outcome.setup_ms
    end = execution_start + outcome.execution_ms
    write_json(
        root / "clusters" / f"{cid}.json",
        {
            "cluster_id": cid,
            "cluster_name": f"job-{spec.job_id}-run-{spec.run_id}",
            **spec_json,
            "cluster_source": "JOB",
            "state": "TERMINATED",
            "start_time": spec.submit_ms,
            "terminated_time": end,
            "spark_context_id": context,
        },
    )
    run = {
        "job_id": spec.job_id,
        "run_id": spec.run_id,
        "run_name": spec.job.name,
        "original_attempt_run_id": spec.retry_of or spec.run_id,
        "attempt_number": spec.attempt,
        "state": {
            "life_cycle_state": "TERMINATED",
            "result_state": outcome.result_state,
            "state_message": outcome.message,
        },
        "start_time": spec.submit_ms,
        "setup_duration": outcome.setup_ms,
        "execution_duration": outcome.execution_ms,
        "cleanup_duration": 0,
        "end_time": end,
        "run_duration": end - spec.submit_ms,
        "cluster_spec": {"new_cluster": spec_json},
        "cluster_instance": {"cluster_id": cid, "spark_context_id": context},
        "overriding_parameters": _parameters(spec),
        "trigger": "RETRY"
        if spec.retry_of
        else ("ONE_TIME" if spec.job.schedule == "adhoc" or spec.tags.get("adhoc") else "PERIODIC"),
        "run_type": "JOB_RUN",
        "format": "SINGLE_TASK",
        **({"tasks": [_task(spec.job, spec.version)]} if spec.version else {}),
        "tags": {
            "sweep": bool(spec.tags.get("sweep", False)),
            "repeat": spec.tags.get("repeat"),
            **({"adhoc": True} if spec.tags.get("adhoc") else {}),
            "lab_scale_factor": spec.scale_factor,
            "lab_virtual_day": spec.day,
        },
    }
    write_json(root / "runs" / f"{spec.run_id}.json", run)


def read_end_ms(root: Path, run_id: int) -> int | None:
    """The recorded (virtual) end time of a finished run, or None when it has not run yet."""
    path = root / "runs" / f"{run_id}.json"
    if not path.is_file():
        return None
    return int(json.loads(path.read_text(encoding="utf-8"))["end_time"])


def read_result_state(root: Path, run_id: int) -> str | None:
    """The recorded result of a finished run, or None when it has not run yet."""
    path = root / "runs" / f"{run_id}.json"
    if not path.is_file():
        return None
    return str(json.loads(path.read_text(encoding="utf-8"))["state"]["result_state"])
