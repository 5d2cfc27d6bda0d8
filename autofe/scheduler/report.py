"""Simulation metrics: per-job records, the summary of a run, tables, JSON and the plot.

Deadline attainment counts every job that has a deadline: one that never finished (cancelled
with a failed dependency, stopped at a budget cap, held for budget until the trace ended, or
given up after too many preemptions) missed it. Completion time is end − submit of finished
jobs; queueing delay is first start − ready (arrived and dependencies done), so waiting for
upstream jobs is not queueing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from autofe.errors import ConfigError
from autofe.scheduler.jobs import TIERS

Status = Literal["done", "cancelled", "stopped", "held", "failed"]
"""How a job ended: finished; cancelled (a dependency did not finish); stopped at a budget
cap; held (never admitted under its budget); failed (given up after too many preemptions)."""


@dataclass(frozen=True)
class LogEntry:
    """One thing that happened: ``kind`` is arrive, ready, hold, to-spot, start, checkpoint,
    preempt, fallback, upgrade, complete, cancel, stop or fail; ``progress``/``saved`` are the
    job's fraction done and fraction saved by checkpoints at that moment (for a preemption:
    the work reached when it struck; the job resumes from ``saved``)."""

    t: float
    kind: str
    job_id: str
    progress: float = 0.0
    saved: float = 0.0
    detail: str = ""


@dataclass(frozen=True)
class JobRecord:
    """How one job fared."""

    job_id: str
    tier: str
    account: str
    submit: float
    deadline: float | None
    status: Status
    ready_at: float | None
    first_start: float | None
    end: float | None
    cost_usd: float
    placement: str
    preemptions: int = 0
    fallbacks: int = 0
    upgrades: int = 0
    batched: int = 0

    @property
    def met_deadline(self) -> bool | None:
        """``None`` without a deadline; else whether it finished in time."""
        if self.deadline is None:
            return None
        return self.status == "done" and self.end is not None and self.end <= self.deadline


@dataclass(frozen=True)
class Summary:
    """The run's headline numbers (seconds, USD)."""

    policy: str
    jobs: int
    done: int
    total_cost_usd: float
    idle_cost_usd: float
    deadline_jobs: int
    deadlines_met: int
    attainment: float | None
    attainment_by_tier: dict[str, float | None]
    misses_by_tier: dict[str, int]
    avg_completion_s: float | None
    p99_completion_s: float | None
    avg_queue_s: float | None
    p99_queue_s: float | None
    budget_overrun_usd: float
    preemptions: int
    fallbacks: int
    upgrades: int
    batched: int
    budget_holds: int
    budget_stops: int
    cancelled: int
    held: int
    failed: int


@dataclass(frozen=True)
class SimulationResult:
    """One policy's run over one trace: per-job records, the event log and the summary."""

    policy: str
    jobs: tuple[JobRecord, ...]
    log: tuple[LogEntry, ...]
    summary: Summary
    spend_by_budget: dict[str, float] = field(default_factory=dict)


def summarize(
    policy: str,
    records: Sequence[JobRecord],
    idle_cost_usd: float = 0.0,
    overrun_usd: float = 0.0,
    budget_holds: int = 0,
) -> Summary:
    """The summary of a run's job records."""
    with_deadline = [r for r in records if r.deadline is not None]
    met = sum(bool(r.met_deadline) for r in with_deadline)
    done = [r for r in records if r.status == "done" and r.end is not None]
    started = [r for r in records if r.first_start is not None and r.ready_at is not None]
    return Summary(
        policy=policy,
        jobs=len(records),
        done=len(done),
        total_cost_usd=sum(r.cost_usd for r in records) + idle_cost_usd,
        idle_cost_usd=idle_cost_usd,
        deadline_jobs=len(with_deadline),
        deadlines_met=met,
        attainment=met / len(with_deadline) if with_deadline else None,
        attainment_by_tier={tier: attainment(records, tier) for tier in TIERS},
        misses_by_tier={tier: misses(records, tier) for tier in TIERS},
        avg_completion_s=_mean([r.end - r.submit for r in done if r.end is not None]),
        p99_completion_s=_p99([r.end - r.submit for r in done if r.end is not None]),
        avg_queue_s=_mean([_queued(r) for r in started]),
        p99_queue_s=_p99([_queued(r) for r in started]),
        budget_overrun_usd=overrun_usd,
        preemptions=sum(r.preemptions for r in records),
        fallbacks=sum(r.fallbacks for r in records),
        upgrades=sum(r.upgrades for r in records),
        batched=sum(r.batched for r in records),
        budget_holds=budget_holds,
        budget_stops=sum(r.status == "stopped" for r in records),
        cancelled=sum(r.status == "cancelled" for r in records),
        held=sum(r.status == "held" for r in records),
        failed=sum(r.status == "failed" for r in records),
    )


def attainment(records: Sequence[JobRecord], tier: str) -> float | None:
    """Fraction of ``tier``'s jobs with a deadline that met it (``None``: no such job)."""
    flags = [r.met_deadline for r in records if r.tier == tier and r.deadline is not None]
    return sum(bool(f) for f in flags) / len(flags) if flags else None


def misses(records: Sequence[JobRecord], tier: str) -> int:
    """How many of ``tier``'s deadlines were missed."""
    return sum(r.met_deadline is False for r in records if r.tier == tier)


def summary_table(results: Sequence[SimulationResult]) -> list[dict[str, str]]:
    """One row of printable columns per policy (for the CLI's table)."""
    return [_row(r.summary) for r in results]


def table_lines(rows: Sequence[Mapping[str, str]]) -> list[str]:
    """Rows of equal keys as aligned text: a header line, then one line per row.

    >>> rows = [{"policy": "static", "cost $": "12.50"}, {"policy": "oracle", "cost $": "7.25"}]
    >>> table_lines(rows)
    ['policy  cost $', 'static   12.50', 'oracle    7.25']
    """
    if not rows:
        return []
    keys = list(rows[0])
    width = {k: max(len(k), *(len(r[k]) for r in rows)) for k in keys}
    first = keys[0]

    def line(cells: Mapping[str, str]) -> str:
        parts = [cells[k].ljust(width[k]) if k == first else cells[k].rjust(width[k]) for k in keys]
        return "  ".join(parts).rstrip()

    return [line({k: k for k in keys}), *(line(r) for r in rows)]


def result_dict(result: SimulationResult, with_jobs: bool = True) -> dict[str, Any]:
    """A run as JSON-ready data: the summary, spend per budget and (optionally) every job."""
    out: dict[str, Any] = {
        "policy": result.policy,
        "summary": asdict(result.summary),
        "spend_by_budget": dict(result.spend_by_budget),
    }
    if with_jobs:
        out["jobs"] = [asdict(r) | {"met_deadline": r.met_deadline} for r in result.jobs]
    return out


def plot_cost_vs_attainment(results: Sequence[SimulationResult], path: Path) -> Path:
    """Write a cost-vs-deadline-attainment scatter (one point per policy) to ``path``.

    Raises:
        ConfigError: matplotlib is not installed (it comes with the ``lab`` extra).
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ConfigError("the plot needs matplotlib: pip install 'autofe[lab]'") from None
    fig, ax = plt.subplots(figsize=(6, 4))
    for i, result in enumerate(results):
        s = result.summary
        share = 100.0 * (s.attainment if s.attainment is not None else 1.0)
        ax.scatter([s.total_cost_usd], [share])
        # labels alternate above and below their points, so close policies stay readable
        below = (4, -12) if i % 2 else (4, 5)
        ax.annotate(
            result.policy,
            (s.total_cost_usd, share),
            xytext=below,
            fontsize=8,
            textcoords="offset points",
        )
    ax.set_xlabel("total cost (USD)")
    ax.set_ylabel("deadlines met (%)")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _row(s: Summary) -> dict[str, str]:
    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.1f}%"

    def sec(x: float | None) -> str:
        return "-" if x is None else f"{x:.0f}"

    return {
        "policy": s.policy,
        "cost $": f"{s.total_cost_usd:.2f}",
        "met": pct(s.attainment),
        "P0 met": pct(s.attainment_by_tier.get("P0")),
        "done": f"{s.done}/{s.jobs}",
        "avg s": sec(s.avg_completion_s),
        "p99 s": sec(s.p99_completion_s),
        "queue s": sec(s.avg_queue_s),
        "overrun $": f"{s.budget_overrun_usd:.2f}",
        "preempt": str(s.preemptions),
        "fallback": str(s.fallbacks),
        "upgrade": str(s.upgrades),
    }


def _queued(r: JobRecord) -> float:
    assert r.first_start is not None and r.ready_at is not None
    return r.first_start - r.ready_at


def _mean(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if values else None


def _p99(values: Sequence[float]) -> float | None:
    return float(np.percentile(values, 99)) if values else None


def spend_by_budget(spent: Mapping[tuple[str, int], float]) -> dict[str, float]:
    """The largest period spend of each budget (what a cap is compared with)."""
    out: dict[str, float] = {}
    for (name, _), usd in spent.items():
        out[name] = max(out.get(name, 0.0), usd)
    return out
