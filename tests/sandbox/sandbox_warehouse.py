"""A small synthetic warehouse for the sandbox tests (a module, not a conftest: mypy checks
the whole tests tree, where a second ``conftest`` module name would clash)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from autofe.sandbox.limits import SandboxLimits
from autofe.warehouse.connect import open_warehouse
from autofe.warehouse.write import insert_rows

RUNS = 1_000
T0 = datetime(2024, 1, 1, 8, 0)

FAST = SandboxLimits(memory_limit="256MB", threads=2, timeout_s=1.0, max_rows=500)
"""Tight limits so the bombs are stopped quickly: 1 s, 256 MB, 500 rows."""


def _jobs() -> list[dict[str, Any]]:
    return [
        {
            "job_id": f"job-{j}",
            "name": f"nightly {j}",
            "task_type": "sql",
            "script_text": f"SELECT * FROM sales.orders o JOIN sales.items i ON o.id = i.id -- {j}",
            "definition": json.dumps({"max_retries": j % 3, "tags": ["etl", f"team{j % 2}"]}),
            "created_time": T0 - timedelta(days=30 + j),
            "source": "test",
        }
        for j in range(10)
    ]


def _configs() -> list[dict[str, Any]]:
    return [
        {
            "config_id": f"cfg-{c}",
            "node_type": "m5.xlarge",
            "vcpu_per_node": 4.0,
            "memory_gb_per_node": 16.0,
            "num_workers": None if c == 0 else 2 * c,
            "autoscale_min": 2 if c == 0 else None,
            "autoscale_max": 8 if c == 0 else None,
            "spark_conf": json.dumps({"spark.sql.shuffle.partitions": str(100 * (c + 1))}),
            "source": "test",
        }
        for c in range(4)
    ]


def _runs() -> list[dict[str, Any]]:
    return [
        {
            "run_id": f"run-{i:04d}",
            "job_id": f"job-{i % 10}",
            "submit_time": T0 + timedelta(hours=i),
            "cluster_config_id": f"cfg-{i % 4}",
            "parameters": json.dumps({"size_mb": 100 + i}),
            "source": "test",
            "start_time": T0 + timedelta(hours=i, minutes=1),
            "end_time": T0 + timedelta(hours=i, minutes=1, seconds=60 + i % 50),
            "duration_s": 60.0 + i % 50,
            "status": "FAILED" if i % 17 == 0 else "SUCCEEDED",
        }
        for i in range(RUNS)
    ]


def _spark_jobs() -> list[dict[str, Any]]:
    return [
        {"app_key": f"app-{i}", "run_id": f"run-{i:04d}", "job_id": 0, "stage_ids": [0, 1, i % 5]}
        for i in range(50)
    ]


def build_warehouse(db: Path) -> Path:
    """Create the warehouse at ``db``, fill it and close it (a sandbox opens it read-only)."""
    con = open_warehouse(db)
    for name, rows in (
        ("jobs", _jobs()),
        ("cluster_configs", _configs()),
        ("runs", _runs()),
        ("spark_jobs", _spark_jobs()),
    ):
        insert_rows(con, name, rows)
    con.close()
    return db
