"""The autofe home folder that ``autofe nightly`` maintains and ``autofe serve`` reads.

Layout::

    HOME/warehouse.duckdb   the workspace's history, ingested incrementally by each nightly run
    HOME/models/            the model registry (:mod:`autofe.modeling.registry`)
    HOME/nightly/<stamp>/   one folder per nightly run (its agent-loop run and ``nightly.json``)
    HOME/nightly.lock       held while a nightly run works (pid, host, start time)
    HOME/actuals.jsonl      finished runs' real durations reported to the API (``/v1/actuals``)
    HOME/scheduler.sqlite   jobs submitted to the scheduler (``schedule submit``, ``/v1/jobs``)
    HOME/served.jsonl       the feature values of every prediction served (training-serving skew)
    HOME/triggers.jsonl     every retraining trigger that fired, with its evidence and action
    HOME/retraining.json    the open retraining request (one per home) and held ones
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from autofe.modeling.registry import Registry
from autofe.scheduler.store import STORE_FILE


@dataclass(frozen=True)
class Home:
    """Paths inside one autofe home folder."""

    root: Path

    @property
    def warehouse(self) -> Path:
        return self.root / "warehouse.duckdb"

    @property
    def registry(self) -> Registry:
        return Registry(self.root)

    @property
    def nightly_runs(self) -> Path:
        return self.root / "nightly"

    @property
    def lock(self) -> Path:
        return self.root / "nightly.lock"

    @property
    def actuals(self) -> Path:
        return self.root / "actuals.jsonl"

    @property
    def scheduler_store(self) -> Path:
        return self.root / STORE_FILE

    @property
    def served(self) -> Path:
        return self.root / "served.jsonl"

    @property
    def triggers(self) -> Path:
        return self.root / "triggers.jsonl"

    @property
    def retraining(self) -> Path:
        return self.root / "retraining.json"
