"""Shared types used across autofe's layers."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Availability(StrEnum):
    """When a warehouse value becomes known, relative to a run's submission.

    The leakage gate reads these tags: ``known_at_submit`` values may describe the run itself,
    ``post_execution`` values only ever from *earlier* runs (ordered by the tagged timestamp).
    """

    KNOWN_AT_SUBMIT = "known_at_submit"
    POST_EXECUTION = "post_execution"


@dataclass(frozen=True)
class IngestIssue:
    """One entry of the ingest report: what could not be ingested and why."""

    path: str
    reason: str
    line: int | None = None
    fatal: bool = False

    def as_dict(self) -> dict[str, object]:
        return {"path": self.path, "line": self.line, "reason": self.reason, "fatal": self.fatal}


@dataclass
class IngestReport:
    """What one ``autofe ingest`` call added to the warehouse."""

    applications: int = 0
    runs: int = 0
    jobs: int = 0
    """New job definitions (recurring jobs), not Spark jobs."""
    spark_jobs: int = 0
    stages: int = 0
    tasks: int = 0
    sql_executions: int = 0
    files_ingested: int = 0
    files_unchanged: int = 0
    decompressed_bytes: int = 0
    events: int = 0
    unknown_events: int = 0
    seconds: float = 0.0
    issues: list[IngestIssue] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        data: dict[str, object] = {k: v for k, v in vars(self).items() if k != "issues"}
        data["files_skipped"] = [i.as_dict() for i in self.issues if i.fatal]
        data["issues"] = [i.as_dict() for i in self.issues]
        return data


HARDWARE_COLUMNS = (
    "node_type",
    "num_workers",
    "vcpu_per_node",
    "memory_gb_per_node",
    "hourly_price",
)
"""The ``cluster_configs`` columns that describe the hardware a run gets (known at submit)."""
