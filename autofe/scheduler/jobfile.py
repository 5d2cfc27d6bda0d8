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

Every number has a bound (issue #27: a ``p50_s`` of 1e308 overflowed the planner's Monte Carlo
and came back as a cost of ``null``): durations, checkpoint intervals, budget periods and how
far a deadline lies ahead are at most :data:`MAX_SECONDS` (10 years), node counts at most
:data:`MAX_NODES`, budgets at most :data:`MAX_USD`, times within what RFC 3339 can write.
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
from autofe.scheduler.jobs import MARKETS, TIERS, Checkpointing, Estimate, JobRequest, Market, Shape

FORMAT = "autofe-jobs/1"

MAX_SECONDS = 315_360_000.0
"""Ten years of 365 days: the longest duration estimate, checkpoint interval or write, budget
period, and the farthest a deadline may lie after its submit time (or now). Longer is a unit
mistake or junk; within it every plan's cost is a finite number
(``tests/scheduler/test_bounds.py``)."""
MIN_DURATION_S = 0.001
"""The shortest duration estimate (``p50_s``, ``low_s``, ``high_s``, ``high99_s``, ``true_s``):
below a millisecond is a unit mistake, and a median near zero under a 99 % bound of years
gives the log-normal tail a log-spread in the hundreds (1 ms: at most 39; see
:data:`autofe.scheduler.duration.LONGEST_SAMPLE_S`)."""
MIN_CHECKPOINT_S = 1.0
"""The shortest checkpoint interval: the planner divides work by it, the simulator steps
through every checkpoint."""
MIN_PERIOD_S = 3600.0
"""The shortest budget period (an hour): the simulator splits spend per period, so a run of
10 years over hourly periods is 87,600 pieces, over periods of a microsecond forever."""
MAX_CHECKPOINTS = 100_000
"""The most checkpoints one run of a trace may write (``true_s / interval_s``): the simulator
steps through each (10**5 take about a second)."""
MAX_NODES = 100_000
"""The most nodes a shape may have ("TYPE xN")."""
MAX_USD = 1e9
"""The largest budget, in USD per period."""
FIRST_TIME = -62_135_596_800.0
"""0001-01-01T00:00:00Z in Unix seconds: the first time RFC 3339 can write."""
LAST_TIME = 253_402_300_799.0
"""9999-12-31T23:59:59Z in Unix seconds: the last time RFC 3339 can write (a submit time or
deadline after it could not be shown in a message or a plan)."""


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
    return parse_jobs(load_document(path), catalog, now, where=str(path))


def load_document(path: Path) -> object:
    """A jobs file's JSON, not yet validated.

    Python's ``json`` raises ``ValueError`` (not a ``JSONDecodeError``) on an integer of more
    than 4300 digits and ``RecursionError`` on deep nesting; both are a bad file, not a bug.

    Raises:
        ScheduleError: the file cannot be read as JSON.
    """
    try:
        doc: object = json.loads(path.read_text(encoding="utf-8"))
    except RecursionError:
        raise ScheduleError(
            f"jobs file {path}: cannot be read as JSON (nested too deeply)"
        ) from None
    except (OSError, ValueError) as exc:  # JSONDecodeError and UnicodeDecodeError included
        raise ScheduleError(f"jobs file {path}: cannot be read as JSON ({exc})") from None
    return doc


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
    if job.markets != MARKETS:
        out["markets"] = list(job.markets)
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
    job = JobRequest(
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
        markets=_markets(item.get("markets"), job_id),
    )
    _check_checkpoints(job)
    return job


def _markets(value: object, job_id: str) -> tuple[Market, ...]:
    """The markets a job allows, in the planner's order; absent: both.

    >>> _markets(["spot", "on-demand"], "j"), _markets(None, "j")
    (('on-demand', 'spot'), ('on-demand', 'spot'))
    """
    if value is None:
        return MARKETS
    if not isinstance(value, list) or not value or not all(v in MARKETS for v in value):
        raise ScheduleError(
            f"'markets' must be a non-empty list of {' and '.join(MARKETS)}", job_id
        )
    if len(set(value)) != len(value):
        raise ScheduleError(f"'markets' lists a market twice: {value}", job_id)
    return tuple(m for m in MARKETS if m in value)


def _check_checkpoints(job: JobRequest) -> None:
    """A run of a trace (``true_s`` known) writes at most :data:`MAX_CHECKPOINTS` checkpoints,
    taking at most :data:`MAX_SECONDS` in all: a simulation steps through each, and through
    the run's whole time (the planner counts them at once, so live requests are not limited)."""
    if job.checkpoint is None:
        return
    interval, write = job.checkpoint.interval_s, job.checkpoint.write_s
    for key, est in job.shapes.items():
        if est.true_s is None:
            continue
        count = math.floor(est.true_s / interval)
        run = f"in shape {key!r} (true_s {est.true_s} s)"
        if count > MAX_CHECKPOINTS:
            raise ScheduleError(
                f"checkpoint interval_s: {interval} s makes {count} checkpoints {run}, "
                f"more than {MAX_CHECKPOINTS}",
                job.job_id,
            )
        if count * write > MAX_SECONDS:
            raise ScheduleError(
                f"checkpoint write_s: {count} writes of {write} s {run} take more than "
                f"10 years ({MAX_SECONDS:.0f} s)",
                job.job_id,
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
        shape = _shape(key, job_id)
        if shape.key in shapes:
            raise ScheduleError(f"shape {shape.key!r} appears twice", job_id)
        shapes[shape.key] = _estimate(est, f"shape {key!r}", job_id)
    return shapes


def _shape(key: str, job_id: str) -> Shape:
    """The shape a key names, with 1 to :data:`MAX_NODES` nodes.

    The digits are counted before they are read: Python refuses to read an integer of more
    than 4300 digits, and a count that long is junk anyway.
    """
    name, _, count = key.rpartition(" x")
    too_long = len(count.lstrip("0")) > len(str(MAX_NODES))
    if name and count.isascii() and count.isdigit() and too_long:
        raise ScheduleError(f"shape {_shown(key)}: more than {MAX_NODES} nodes", job_id)
    shape = Shape.parse(key)
    if shape.nodes < 1:
        raise ScheduleError(f"shape {key!r}: needs at least one node", job_id)
    if shape.nodes > MAX_NODES:
        raise ScheduleError(f"shape {key!r}: {shape.nodes} nodes is more than {MAX_NODES}", job_id)
    return shape


def _shown(text: str, limit: int = 60) -> str:
    """``text`` quoted for a message, its middle cut when it is long.

    >>> _shown("m4.xlarge x" + "9" * 100, 20)
    "'m4.xlarge x99…999999'"
    """
    if len(text) <= limit:
        return repr(text)
    return repr(text[: 2 * limit // 3] + "…" + text[len(text) - limit // 3 :])


def _estimate(raw: object, what: str, job_id: str) -> Estimate:
    if not isinstance(raw, dict):
        raise ScheduleError(f"{what}: expected an object with p50_s, low_s, high_s", job_id)
    p50 = _duration(raw.get("p50_s"), f"{what} p50_s", job_id)
    low = _duration(raw.get("low_s", p50), f"{what} low_s", job_id)
    high = _duration(raw.get("high_s", p50), f"{what} high_s", job_id)
    if not low <= p50 <= high:
        raise ScheduleError(
            f"{what}: needs low_s <= p50_s <= high_s, got {low}, {p50}, {high}", job_id
        )
    true = raw.get("true_s")
    return Estimate(
        p50,
        low,
        high,
        None if true is None else _duration(true, f"{what} true_s", job_id),
        _tail(raw.get("high99_s"), high, what, job_id),
    )


def _tail(raw: object, high: float, what: str, job_id: str) -> float | None:
    """The optional calibrated 99 % bound: absent, or at least the 90 % interval's high."""
    if raw is None:
        return None
    tail = _duration(raw, f"{what} high99_s", job_id)
    if tail < high:
        raise ScheduleError(f"{what}: needs high99_s >= high_s, got {tail} < {high}", job_id)
    return tail


def _checkpoint(raw: object, job_id: str) -> Checkpointing | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ScheduleError("'checkpoint' must be an object with interval_s", job_id)
    return Checkpointing(
        interval_s=_seconds(
            raw.get("interval_s"), "checkpoint interval_s", job_id, least=MIN_CHECKPOINT_S
        ),
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
    if usd > MAX_USD:
        raise ScheduleError(f"budget {name!r} usd: {usd} USD is more than {MAX_USD:.0f} USD")
    period = _number(raw.get("period_s", 86400.0), f"budget {name!r} period_s", None)
    if period <= 0:
        raise ScheduleError(f"budget {name!r}: period_s must be positive, got {period}")
    _bounded(period, f"budget {name!r} period_s", None, MIN_PERIOD_S)
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
    since = f"its submit time {when(job.submit)}"
    if now is not None and now > job.submit:  # a live request planned from now
        since = f"now ({when(now, 0)})"
    start = job.submit if now is None else max(job.submit, now)
    if job.deadline - start > MAX_SECONDS:
        raise ScheduleError(
            f"deadline {when(job.deadline)} is more than 10 years ({MAX_SECONDS:.0f} s) "
            f"after {since}",
            job.job_id,
        )


def when(t: float, digits: int = 1) -> str:
    """A time for a message: RFC 3339 for Unix times (after 2001), else clock seconds.

    Traces count seconds from 0, live requests carry Unix times; users wrote the latter as
    RFC 3339, so they read them back that way.

    >>> when(1796088600.0), when(500.0), when(1000.0, 0)
    ('2026-12-01T01:30:00Z', '500.0', '1000')
    """
    if 1e9 <= t <= LAST_TIME:
        return (
            datetime.fromtimestamp(t, UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")
        )
    return f"{t:.{digits}f}"


def _time(raw: object, what: str, job_id: str) -> float:
    """Unix seconds (or trace seconds) from a number or an RFC 3339 string with an offset,
    between :data:`FIRST_TIME` and :data:`LAST_TIME`."""
    if isinstance(raw, str):
        try:
            when = datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except ValueError:
            raise ScheduleError(f"{what} {raw!r} is not an RFC 3339 time", job_id) from None
        if when.tzinfo is None:  # else the machine's time zone would move the deadline
            raise ScheduleError(f"{what} {raw!r} has no UTC offset (add Z or +HH:MM)", job_id)
        value = when.timestamp()
    else:
        value = _number(raw, what, job_id)
    if not FIRST_TIME <= value <= LAST_TIME:
        shown = repr(raw) if isinstance(raw, str) else f"{value} s"
        raise ScheduleError(
            f"{what} {shown} is not between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z "
            f"({FIRST_TIME:.0f} to {LAST_TIME:.0f} s)",
            job_id,
        )
    return value


def _duration(raw: object, what: str, job_id: str) -> float:
    """A duration estimate: :data:`MIN_DURATION_S` to :data:`MAX_SECONDS`."""
    return _seconds(raw, what, job_id, least=MIN_DURATION_S)


def _seconds(raw: object, what: str, job_id: str, zero: bool = False, least: float = 0.0) -> float:
    """Seconds: positive (``zero``: non-negative), at least ``least``, at most 10 years."""
    value = _number(raw, what, job_id)
    if value < 0 or (value == 0 and not zero):
        raise ScheduleError(
            f"{what} must be {'non-negative' if zero else 'positive'}, got {value}", job_id
        )
    return _bounded(value, what, job_id, least)


def _bounded(value: float, what: str, job_id: str | None, least: float) -> float:
    """``value`` seconds if within ``least`` and :data:`MAX_SECONDS`, else a message saying so.

    >>> _bounded(4e8, "p50_s", None, 0.001)
    Traceback (most recent call last):
    autofe.errors.ScheduleError: p50_s: 400000000.0 s is more than 10 years (315360000 s)
    """
    if value > MAX_SECONDS:
        raise ScheduleError(
            f"{what}: {value} s is more than 10 years ({MAX_SECONDS:.0f} s)", job_id
        )
    if value < least:
        raise ScheduleError(f"{what}: {value} s is less than {_span(least)}", job_id)
    return value


def _span(seconds: float) -> str:
    """A lower bound as a message names it.

    >>> _span(0.001), _span(1.0), _span(3600.0)
    ('1 ms (0.001 s)', '1 s', '1 hour (3600 s)')
    """
    names = {0.001: "1 ms (0.001 s)", 3600.0: "1 hour (3600 s)"}
    return names.get(seconds, f"{seconds:g} s")


def _number(raw: object, what: str, job_id: str | None) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise ScheduleError(f"{what} must be a finite number, got {raw!r}", job_id)
    try:
        value = float(raw)
    except OverflowError:  # an integer of 310 digits or more: no float holds it
        raise ScheduleError(
            f"{what} must be a finite number, got an integer too large for a float", job_id
        ) from None
    if not math.isfinite(value):
        raise ScheduleError(f"{what} must be a finite number, got {raw!r}", job_id)
    return value
