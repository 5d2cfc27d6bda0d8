"""The simulation's mutable state: each job's run, each cluster, and who pays for it.

Only :class:`~autofe.scheduler.simulate_engine.Engine` changes these; a run becomes the
immutable :class:`~autofe.scheduler.report.JobRecord` of the result at the end.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from autofe.scheduler.fleet import WarmCluster
from autofe.scheduler.jobs import JobRequest
from autofe.scheduler.plan import ClusterOption
from autofe.scheduler.policies import placement
from autofe.scheduler.report import JobRecord, Status
from autofe.scheduler.simulate_world import shape_nodes


@dataclass
class Meter:
    """Who pays a running (or idle warm) cluster, and how much of its reservation is left."""

    names: tuple[str, ...]
    account: str
    hourly: float
    since: float
    reserved: float
    total: float = 0.0


@dataclass
class ClusterState:
    cid: str
    cand: ClusterOption
    hourly: float
    job_id: str | None
    idle_since: float = 0.0
    meter: Meter | None = None
    token: int = 0

    @property
    def nodes(self) -> int:
        return self.cand.shape.nodes

    def warm(self) -> WarmCluster:
        return WarmCluster(placement(self.cand, None), self.hourly, self.idle_since, self.cid)


@dataclass
class RunState:
    """One job's mutable state in the simulation."""

    job: JobRequest
    seen: JobRequest
    # pending, waiting, queued, running; then done, cancelled, stopped, held or failed
    status: str = "pending"
    cand: ClusterOption | None = None
    fallback_after: int | None = None
    progress: float = 0.0
    saved: float = 0.0
    phase: str = ""  # "up" (start-up, restore) or "work"
    phase_start: float = 0.0
    boundary: float = 1.0
    token: int = 0
    attempt: int = 0
    ready_at: float | None = None
    first_start: float | None = None
    end: float | None = None
    seg_start: float = 0.0
    spot_s: float = 0.0
    gained: float = 0.0
    worked_s: float = 0.0
    preemptions: int = 0
    fallbacks: int = 0
    upgrades: int = 0
    batched: int = 0
    cost: float = 0.0
    meter: Meter | None = None
    cluster: ClusterState | None = None
    held: bool = False
    held_at: tuple[float, float] = (0.0, 0.0)  # budget headroom and claims ahead when held
    options: list[ClusterOption] | None = None
    # before a shape is chosen: the least nodes it needs, the least work it is predicted
    least_nodes: int = field(init=False)
    least_high_s: float = field(init=False)

    def __post_init__(self) -> None:
        self.least_nodes = min(shape_nodes(key) for key in self.seen.shapes)
        self.least_high_s = min(est.high_s for est in self.seen.shapes.values())

    @property
    def done_or_failed(self) -> bool:
        return self.status in ("done", "cancelled", "stopped", "held", "failed")


def same_kind(cluster: ClusterOption, chosen: ClusterOption) -> bool:
    """Whether a warm cluster can take a run placed on ``chosen``: same shape and market
    (any region)."""
    return (cluster.shape, cluster.market) == (chosen.shape, chosen.market)


def job_record(run: RunState) -> JobRecord:
    """What the result reports of one run once the simulation has ended."""
    status: Status = run.status  # type: ignore[assignment]
    where = ""
    if run.cand is not None:
        c = run.cand
        where = f"{c.shape.key} {c.offer.cloud}/{c.offer.region} {c.market}"
    return JobRecord(
        job_id=run.job.job_id,
        tier=run.job.tier,
        account=run.job.account,
        submit=run.job.submit,
        deadline=run.job.deadline,
        status=status,
        ready_at=run.ready_at,
        first_start=run.first_start,
        end=run.end,
        cost_usd=run.cost,
        placement=where,
        preemptions=run.preemptions,
        fallbacks=run.fallbacks,
        upgrades=run.upgrades,
        batched=run.batched,
    )
