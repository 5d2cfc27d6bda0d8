"""A synthetic warehouse of recurring jobs that rerun on one configuration, then move.

Each job reads a fixed input (a known-at-submit run attribute); a run takes its input per core
of the cluster, times a factor of the job on that configuration, with 2 % noise. So the job's
last duration predicts its next rerun almost exactly, while on a configuration the job has not
run on that history describes other hardware (2 to 32 times more or fewer cores); the input
per core carries across. Written with the warehouse's own writers.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from autofe.featurespec import FeatureSpec
from autofe.warehouse.connect import open_warehouse
from autofe.warehouse.write import insert_rows

T0 = datetime(2024, 1, 1)
CORES = {"c1": 4, "c2": 8, "c3": 16, "c4": 32, "c5": 64, "c6": 128}
JOBS = 10
BLOCKS = 4
"""Configurations each job runs on, one after the other."""
RERUNS = 8
"""Runs of a job in a row on one configuration."""
FACTOR = 0.3
"""Spread (log) of the job × configuration factor no submit-time column explains."""

PER_CORE_SPEC = FeatureSpec(
    name="input_mb_per_core",
    category="static-config",
    sql="SELECT r.run_id, a.value / (c.vcpu_per_node * c.num_workers) AS value FROM runs AS r "
    "JOIN cluster_configs AS c ON c.config_id = r.cluster_config_id "
    "JOIN run_attributes AS a ON a.run_id = r.run_id AND a.name = 'input_mb'",
)
"""Known at submit, in units that transfer: the work over the hardware."""
LAST_SPEC = FeatureSpec(
    name="last_duration_s",
    category="history",
    sql=(
        "SELECT t.run_id, (SELECT h.duration_s FROM runs AS h "
        "WHERE h.job_id = t.job_id AND h.status = 'SUCCEEDED' AND h.end_time < t.submit_time "
        "ORDER BY h.end_time DESC, h.run_id DESC LIMIT 1) AS value FROM runs AS t"
    ),
)
"""The job's last finished duration, on whatever configuration: perfect for a rerun."""


def reruns_warehouse(db: Path, seed: int = 0) -> Path:
    """Write the warehouse to ``db``: JOBS × BLOCKS × RERUNS runs, an hour apart."""
    rng = np.random.default_rng(seed)
    work = np.exp(rng.uniform(np.log(2e3), np.log(2e4), JOBS))
    factor = np.exp(rng.normal(0.0, FACTOR, (JOBS, len(CORES))))
    order = sorted(
        (block * RERUNS + k, j, int(c))
        for j in range(JOBS)
        for block, c in enumerate(rng.permutation(len(CORES))[:BLOCKS])
        for k in range(RERUNS)
    )
    runs: list[dict[str, Any]] = []
    for i, (_, j, c) in enumerate(order):
        config = list(CORES)[c]
        d = float(work[j] / CORES[config] * factor[j, c] * (1 + rng.normal(0.0, 0.02)))
        submit = T0 + timedelta(hours=i)
        runs.append(
            {"run_id": f"r{i:04d}", "job_id": f"j{j}", "cluster_config_id": config,
             "submit_time": submit, "start_time": submit, "end_time": submit + timedelta(seconds=d),
             "duration_s": d, "status": "SUCCEEDED", "source": "test"}
        )  # fmt: skip
    _write(db, runs, [float(work[int(r["job_id"][1:])]) for r in runs])
    return db


def _write(db: Path, runs: list[dict[str, Any]], input_mb: list[float]) -> None:
    configs = [
        {"config_id": c, "node_type": f"n{n}", "vcpu_per_node": float(n), "num_workers": 1,
         "memory_gb_per_node": 4.0 * n, "source": "test"}
        for c, n in CORES.items()
    ]  # fmt: skip
    jobs = [{"job_id": f"j{j}", "name": f"job {j}", "source": "test"} for j in range(JOBS)]
    attributes = [
        {"run_id": r["run_id"], "name": "input_mb", "value": mb, "availability": "known_at_submit"}
        for r, mb in zip(runs, input_mb, strict=True)
    ]
    con = open_warehouse(db)
    insert_rows(con, "cluster_configs", configs)
    insert_rows(con, "jobs", jobs)
    insert_rows(con, "runs", runs)
    insert_rows(con, "run_attributes", attributes)
    con.close()
