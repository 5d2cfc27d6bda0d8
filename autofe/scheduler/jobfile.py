"""Job files and traces: one JSON format for ``schedule plan``, ``submit`` and the simulator.

A live jobs file and a simulation trace differ only in what they know: a trace's estimates
carry ``true_s`` (the runtime the job really had on that shape). Everything is validated on
read, and every error names the job and the field, so an orchestrator can fix one request::

    {"format": "autofe-jobs/1", "source": "...",
     "budgets": [{"name": "team-a", "usd": 120.0, "period_s": 86400}],
     "jobs": [{"job_id": "etl-1", "submit": 0, "tier": "P1", "account": "team-a",
               "deadline": 3600, "depends_on": [],
               "checkpoint": {"interval_s": 600, "write_s": 10, "restore_s": 30},
               "shapes": {"m4.xlarge x4": {"p50_s": 900, "low_s": 700, "high_s": 1300,
                                          "high99_s": 1700}}}]}

Times are seconds on one clock (numbers) or RFC 3339 strings (converted to Unix seconds).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from graphlib import CycleError, TopologicalSorter
from pathlib import Path
from typing import Any

from autofe.errors import ScheduleError
from autofe.scheduler.catalog import Catalog
from autofe.scheduler.jobs import TIERS, Checkpointing, Estimate, JobRequest, Shape

FORMAT = "autofe-jobs/1"


@dataclass(frozen=True)
class Budget:
    """``usd`` to spend per ``period_s`` by the jobs of one account (or one tier, e.g. "P3")."""

    name: str
    usd: float
    period_s: float = 86400.0


@dataclass(frozen=True)
class JobSet:
    """The jobs and budgets of one file, in file order."""

    jobs: tuple[JobRequest, ...]
    budgets: tuple[Budget, ...] = ()
    source: str = ""


def read_jobs(path: Path, catalog: Catalog | None = None, now: float | None = None) -> JobSet:
    """Read and validate a jobs file or trace.

    Args:
        path: the JSON file.
        catalog: when given, every shape's instance type must be in it.
        now: when given, a deadline before it is an error (live requests; traces pass None).

    Raises:
        ScheduleError: the file is unreadable, or a job or budget is invalid (named).
    """
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ScheduleError(f"jobs file {path}: cannot be read as JSON ({exc})") from None
    return parse_jobs(doc, catalog, now, where=str(path))


def parse_jobs(
    doc: object, catalog: Catalog | None = None, now: float | None = None, where: str = "jobs"
) -> JobSet:
    """Validate an already-decoded jobs document (see :func:`read_jobs`)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), list):
        raise ScheduleError(f"{where}: expected an object with a 'jobs' list")
    if doc.get("format", FORMAT) != FORMAT:
        raise ScheduleError(f"{where}: format {doc.get('format')!r} is not {FORMAT!r}")
    jobs = tuple(_job(item, i) for i, item in enumerate(doc["jobs"]))
    _check_unique(jobs)
    check_dependencies(jobs)
    for job in jobs:
        _check_deadline(job, now)
        if catalog is not None:
            for key in job.shapes:
                catalog.offers(Shape.parse(key).instance_type, job.job_id)
    budgets = tuple(_budget(item) for item in doc.get("budgets") or [])
    return JobSet(jobs, budgets, str(doc.get("source", "")))


def check_dependencies(jobs: Sequence[JobRequest]) -> None:
    """Every dependency names a job of the set and no job depends on itself through others.

    >>> a = JobRequest("a", 0.0, {"x x1": Estimate(1, 1, 1)}, depends_on=("b",))
    >>> b = JobRequest("b", 0.0, {"x x1": Estimate(1, 1, 1)}, depends_on=("a",))
    >>> check_dependencies([a, b])
    Traceback (most recent call last):
    autofe.errors.ScheduleError: job 'a': dependency cycle a -> b -> a
    """
    by_id = {job.job_id: job for job in jobs}
    for job in jobs:
        for dep in job.depends_on:
            if dep not in by_id:
                raise ScheduleError(
                    f"depends on {dep!r}, which is not a job of this set", job.job_id
                )
    try:
        TopologicalSorter({job.job_id: job.depends_on for job in jobs}).prepare()
    except CycleError as exc:
        cycle = list(reversed(exc.args[1]))
        raise ScheduleError(f"dependency cycle {' -> '.join(cycle)}", cycle[0]) from None


def write_jobs(
    path: Path, jobs: Iterable[JobRequest], budgets: Iterable[Budget] = (), source: str = ""
) -> None:
    """Write jobs (and budgets) in the format :func:`read_jobs` reads back unchanged."""
    doc = {
        "format": FORMAT,
        "source": source,
        "budgets": [vars(b) for b in budgets],
        "jobs": [job_dict(job) for job in jobs],
    }
    path.write_text(json.dumps(doc, indent=1) + "\n")


def job_dict(job: JobRequest) -> dict[str, Any]:
    """One job as its JSON object (estimates without ``true_s`` when it is unknown)."""
    shapes = {
        key: {k: v for k, v in vars(est).items() if v is not None}
        for key, est in job.shapes.items()
    }
    out: dict[str, Any] = {
        "job_id": job.job_id,
        "submit": job.submit,
        "tier": job.tier,
        "account": job.account,
        "deadline": job.deadline,
        "depends_on": list(job.depends_on),
        "checkpoint": vars(job.checkpoint) if job.checkpoint else None,
        "shapes": shapes,
    }
    if job.labels:
        out["labels"] = dict(job.labels)
    return out


def _job(item: object, index: int) -> JobRequest:
    job_id = item.get("job_id") if isinstance(item, dict) else None
    if not isinstance(job_id, str) or not job_id:
        raise ScheduleError(f"jobs[{index}]: needs a non-empty string 'job_id'")
    assert isinstance(item, dict)
    tier = item.get("tier", "P2")
    if tier not in TIERS:
        raise ScheduleError(f"tier {tier!r} is not one of {', '.join(TIERS)}", job_id)
    deps = item.get("depends_on") or []
    if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
        raise ScheduleError("'depends_on' must be a list of job ids", job_id)
    return JobRequest(
        job_id=job_id,
        submit=_time(item.get("submit", 0.0), "submit", job_id),
        shapes=_shapes(item.get("shapes"), job_id),
        tier=tier,
        account=str(item.get("account", "default")),
        deadline=None
        if item.get("deadline") is None
        else _time(item["deadline"], "deadline", job_id),
        depends_on=tuple(deps),
        checkpoint=_checkpoint(item.get("checkpoint"), job_id),
        labels=_labels(item.get("labels"), job_id),
    )


def _labels(raw: object, job_id: str) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ScheduleError("'labels' must be an object of strings", job_id)
    return {str(k): str(v) for k, v in raw.items()}


def _shapes(raw: object, job_id: str) -> dict[str, Estimate]:
    if not isinstance(raw, dict) or not raw:
        raise ScheduleError("'shapes' must map at least one 'TYPE xN' to an estimate", job_id)
    shapes: dict[str, Estimate] = {}
    for key, est in raw.items():
        shape = Shape.parse(key)
        if shape.nodes < 1:
            raise ScheduleError(f"shape {key!r}: needs at least one node", job_id)
        if shape.key in shapes:
            raise ScheduleError(f"shape {shape.key!r} appears twice", job_id)
        shapes[shape.key] = _estimate(est, f"shape {key!r}", job_id)
    return shapes


def _estimate(raw: object, what: str, job_id: str) -> Estimate:
    if not isinstance(raw, dict):
        raise ScheduleError(f"{what}: expected an object with p50_s, low_s, high_s", job_id)
    p50 = _seconds(raw.get("p50_s"), f"{what} p50_s", job_id)
    low = _seconds(raw.get("low_s", p50), f"{what} low_s", job_id)
    high = _seconds(raw.get("high_s", p50), f"{what} high_s", job_id)
    if not low <= p50 <= high:
        raise ScheduleError(
            f"{what}: needs low_s <= p50_s <= high_s, got {low}, {p50}, {high}", job_id
        )
    true = raw.get("true_s")
    return Estimate(
        p50,
        low,
        high,
        None if true is None else _seconds(true, f"{what} true_s", job_id),
        _tail(raw.get("high99_s"), high, what, job_id),
    )


def _tail(raw: object, high: float, what: str, job_id: str) -> float | None:
    """The optional calibrated 99 % bound: absent, or at least the 90 % interval's high."""
    if raw is None:
        return None
    tail = _seconds(raw, f"{what} high99_s", job_id)
    if tail < high:
        raise ScheduleError(f"{what}: needs high99_s >= high_s, got {tail} < {high}", job_id)
    return tail


def _checkpoint(raw: object, job_id: str) -> Checkpointing | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ScheduleError("'checkpoint' must be an object with interval_s", job_id)
    return Checkpointing(
        interval_s=_seconds(raw.get("interval_s"), "checkpoint interval_s", job_id),
        write_s=_seconds(raw.get("write_s", 0.0), "checkpoint write_s", job_id, zero=True),
        restore_s=_seconds(raw.get("restore_s", 0.0), "checkpoint restore_s", job_id, zero=True),
    )


def _budget(raw: object) -> Budget:
    name = raw.get("name") if isinstance(raw, dict) else None
    if not isinstance(name, str) or not name:
        raise ScheduleError("budgets: every budget needs a non-empty 'name' (account or tier)")
    assert isinstance(raw, dict)
    usd = _number(raw.get("usd"), f"budget {name!r} usd", None)
    if usd < 0:
        raise ScheduleError(f"budget {name!r}: negative budget {usd} USD")
    period = _number(raw.get("period_s", 86400.0), f"budget {name!r} period_s", None)
    if period <= 0:
        raise ScheduleError(f"budget {name!r}: period_s must be positive, got {period}")
    return Budget(name, usd, period)


def _check_unique(jobs: Sequence[JobRequest]) -> None:
    seen: set[str] = set()
    for job in jobs:
        if job.job_id in seen:
            raise ScheduleError("job id appears twice", job.job_id)
        seen.add(job.job_id)


def _check_deadline(job: JobRequest, now: float | None) -> None:
    if job.deadline is None:
        return
    if job.deadline <= job.submit:
        raise ScheduleError(
            f"deadline {when(job.deadline)} is not after its submit time {when(job.submit)}",
            job.job_id,
        )
    if now is not None and job.deadline <= now:
        raise ScheduleError(
            f"deadline {when(job.deadline)} is in the past (now {when(now, 0)})", job.job_id
        )


def when(t: float, digits: int = 1) -> str:
    """A time for a message: RFC 3339 for Unix times (after 2001), else clock seconds.

    Traces count seconds from 0, live requests carry Unix times; users wrote the latter as
    RFC 3339, so they read them back that way.

    >>> when(1796088600.0), when(500.0), when(1000.0, 0)
    ('2026-12-01T01:30:00Z', '500.0', '1000')
    """
    if t >= 1e9:
        return (
            datetime.fromtimestamp(t, UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")
        )
    return f"{t:.{digits}f}"


def _time(raw: object, what: str, job_id: str) -> float:
    if isinstance(raw, str):
        try:
            when = datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except ValueError:
            raise ScheduleError(f"{what} {raw!r} is not an RFC 3339 time", job_id) from None
        if when.tzinfo is None:  # else the machine's time zone would move the deadline
            raise ScheduleError(f"{what} {raw!r} has no UTC offset (add Z or +HH:MM)", job_id)
        return when.timestamp()
    return _number(raw, what, job_id)


def _seconds(raw: object, what: str, job_id: str, zero: bool = False) -> float:
    value = _number(raw, what, job_id)
    if value < 0 or (value == 0 and not zero):
        raise ScheduleError(
            f"{what} must be {'non-negative' if zero else 'positive'}, got {value}", job_id
        )
    return value


def _number(raw: object, what: str, job_id: str | None) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw):
        raise ScheduleError(f"{what} must be a finite number, got {raw!r}", job_id)
    return float(raw)
