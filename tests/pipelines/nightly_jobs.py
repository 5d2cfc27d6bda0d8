"""A retraining job in a home's scheduler store, submitted as an orchestrator would, for the
nightly tests of ``--handle``: a jobs document in the shape of examples/schedule/jobs.json (its
first job's first shape, planned against the shipped instance catalog), whose duration is
:func:`autofe.pipelines.retraining_estimate.estimate_retraining`'s."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from autofe.pipelines.retraining_estimate import estimate_retraining
from autofe.scheduler.catalog import load_catalog
from autofe.scheduler.store import JobStore, submit_document

EXAMPLE_JOBS = Path(__file__).resolve().parents[2] / "examples" / "schedule" / "jobs.json"


def retraining_document(home: Path, budget_seconds: float, now: float) -> dict[str, Any]:
    """One P2 job ``autofe-nightly`` on the example's first shape, due in six hours."""
    example = json.loads(EXAMPLE_JOBS.read_text())
    shape = next(iter(example["jobs"][0]["shapes"]))
    estimate = estimate_retraining(home, "incremental", budget_seconds)
    duration = {"p50_s": estimate.p50_s, "low_s": estimate.low_s, "high_s": estimate.high_s}
    job = {
        "job_id": "autofe-nightly",
        "submit": now,
        "tier": "P2",
        "account": "ml",
        "deadline": now + 6 * 3600.0,
        "shapes": {shape: duration},
    }
    return {"format": example["format"], "jobs": [job]}


def submit_retraining(home: Path, budget_seconds: float = 60.0) -> str:
    """Submit the job to ``HOME/scheduler.sqlite`` (created if new); its handle."""
    now = time.time()
    doc = retraining_document(home, budget_seconds, now)
    [record] = submit_document(JobStore.in_home(home), doc, load_catalog(), now)
    assert record.state == "queued"
    return record.handle
