"""A synthetic warehouse of recurring jobs that rerun on one configuration after moving once.

Each job reads a fixed input (a known-at-submit run attribute). Its first :data:`FIRST` runs
are on one configuration, then it moves for good to another and reruns there :data:`RERUNS`
times; every job moves within the first quarter of the month, so the time-ordered CV's test
blocks (the later half of the training runs) hold only reruns. A run takes ``SECONDS_PER_MB``
seconds per MB of input per core, times a factor of the job on that configuration (spread
:data:`FACTOR`) and the job's drift (a random walk from run to run, :data:`DRIFT`: its data
changes), neither of which a submit-time column explains, with 2 % noise.

So the job's last duration (on whatever configuration, :data:`LAST_SPEC`) is nearly perfect in
time, while on a configuration the job has not run on it is another hardware's duration, 2 to
8 times off (the cores of the configurations); the input per core (:data:`PER_CORE_SPEC`)
carries across. Written with the warehouse's own writers.
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
CORES = {"c1": 4, "c2": 8, "c3": 16, "c4": 32}
JOBS = 12
FIRST = 4
"""Runs of a job on its first configuration, all in the first quarter of the runs."""
RERUNS = 16
"""Runs of a job on the configuration it moved to."""
FACTOR = 0.15
"""Spread (log) of the job x configuration factor no submit-time column explains."""
DRIFT = 0.05
"""Step (log) of each job's random walk from one run to the next."""
SECONDS_PER_MB = 3.0
"""Seconds per MB per core: the input per core is in proportion to the duration, not an
estimate of it in seconds (so it is no anchor of the model)."""

PER_CORE_SPEC = FeatureSpec(
    name="input_mb_per_core",
    category="static-config",
    sql="SELECT r.run_id, a.value / (c.vcpu_per_node * c.num_workers) AS value FROM runs AS r "
    "JOIN cluster_configs AS c ON c.config_id = r.cluster_config_id "
    "JOIN run_attributes AS a ON a.run_id = r.run_id AND a.name = 'input_mb'",
)
"""Known at submit, in units that transfer: the work over the configuration's cores."""
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
    """Write the warehouse to ``db``: JOBS x (FIRST + RERUNS) runs, an hour apart (a job's
    runs twelve hours apart, so each ends before the job's next is submitted)."""
    rng = np.random.default_rng(seed)
    work = np.exp(rng.uniform(np.log(2e3), np.log(2e4), JOBS))
    factor = np.exp(rng.normal(0.0, FACTOR, (JOBS, len(CORES))))
    moves = [rng.choice(len(CORES), 2, replace=False) for _ in range(JOBS)]
    order = [(j, int(moves[j][0])) for _ in range(FIRST) for j in range(JOBS)]
    order += [(j, int(moves[j][1])) for _ in range(RERUNS) for j in range(JOBS)]
    drift = np.exp(np.cumsum(rng.normal(0.0, DRIFT, (JOBS, FIRST + RERUNS)), axis=1))
    runs: list[dict[str, Any]] = []
    for i, (j, c) in enumerate(order):
        config = list(CORES)[c]
        noise = drift[j, i // JOBS] * (1 + rng.normal(0.0, 0.02))
        d = float(SECONDS_PER_MB * work[j] / CORES[config] * factor[j, c] * noise)
        submit = T0 + timedelta(hours=i)
        runs.append(
            {"run_id": f"r{i:04d}", "job_id": f"j{j:02d}", "cluster_config_id": config,
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
    jobs = [{"job_id": f"j{j:02d}", "name": f"job {j}", "source": "test"} for j in range(JOBS)]
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
