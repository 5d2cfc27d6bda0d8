"""An ``autofe run``'s holdout on the runs it has history for, beside the best lookup's.

Issue #28 asks for the holdout runs whose job *and script version* have at least five training
runs (the recurring jobs a user relies on most): MAPE, median APE and the share within ±20 %,
for the model (``holdout.json``) and for the job x configuration median run by run
(:func:`autofe.modeling.baselines.job_config_median_online`) on the same runs, then every other
simple baseline of :data:`autofe.modeling.baselines.BASELINES` there. A script
version is the md5 of the run's script text, else its job's.

Usage (from the repository root)::

    .venv/bin/python scripts/holdout_subset.py RUN_DIR [--min-runs 5]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from autofe.modeling.baselines import BASELINES, FACTS_SQL, as_facts, job_config_median_online
from autofe.modeling.metrics import score
from autofe.run_dir import RunDir
from autofe.sandbox.session import Sandbox

VERSIONS_SQL = (
    "SELECT r.run_id, coalesce(r.job_id, ''), md5(coalesce(r.script_text, j.script_text, '')) "
    "FROM runs AS r LEFT JOIN jobs AS j ON j.job_id = r.job_id "
    "WHERE r.status = 'SUCCEEDED' AND r.duration_s > 0 AND r.submit_time IS NOT NULL "
    "ORDER BY r.submit_time, r.run_id"
)
"""The labelled runs in the model's order, with their job and script version."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--min-runs", type=int, default=5)
    args = parser.parse_args()
    run = RunDir(args.run_dir)
    holdout = json.loads(run.holdout_predictions.read_text(encoding="utf-8"))["runs"]
    with Sandbox.open(run.warehouse) as sandbox:
        versions = [(str(r), (str(j), str(s))) for r, j, s in sandbox.query(VERSIONS_SQL).rows]
        facts = as_facts(sandbox.query(FACTS_SQL).rows)
    cut = len(versions) - len(holdout)
    seen = Counter(key for _, key in versions[:cut])
    version_of = dict(versions)
    lookup = job_config_median_online(facts, cut)
    picked = [i for i, h in enumerate(holdout) if seen[version_of[h["run_id"]]] >= args.min_runs]
    actual = np.array([holdout[i]["actual_s"] for i in picked])
    model = np.array([holdout[i]["p50_s"] for i in picked])
    print(f"{len(picked)} of {len(holdout)} holdout runs (job and script version with at least "
          f"{args.min_runs} training runs)")  # fmt: skip
    print(f"model: {_line(actual, model)}")
    print(f"job x configuration median, run by run: {_line(actual, lookup[picked])}")
    for _, label, predictor in BASELINES:  # every simple baseline on the same runs
        if predictor is not job_config_median_online:
            predicted = np.asarray(predictor(facts, cut, 0))[picked]
            print(f"{label}: {_line(actual, predicted)}")


def _line(actual: NDArray[np.float64], predicted: NDArray[np.float64]) -> str:
    m = score(actual, predicted)
    return (
        f"MAPE {m.mape:.1%}, median APE {m.median_ape:.1%}, log-R² {m.r2:.2f}, "
        f"within ±20 % {m.within_20:.0%}"
    )


if __name__ == "__main__":
    main()
