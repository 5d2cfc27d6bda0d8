"""The simulation's event loop: one handler per event kind over one shared world.

Events (arrival, cluster up, checkpoint, completion, preemption, runtime check, budget
reservation, warm-cluster expiry, budget window) are kept in one heap ordered by time; every
event at an instant is handled before the queue is dispatched. The world it simulates is
described in :mod:`autofe.scheduler.simulate`.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from dataclasses import replace

from autofe.errors import ScheduleError
from autofe.scheduler.catalog import Catalog
from autofe.scheduler.duration import duration_quantile
from autofe.scheduler.fleet import (
    WarmChoice,
    WarmCluster,
    idle_reservation_usd,
    idle_timeout,
    keep_past_timeout,
    pick_warm,
    room_from_idle,
    worth_keeping,
)
from autofe.scheduler.jobfile import JobSet
from autofe.scheduler.jobs import TIERS, Placement
from autofe.scheduler.plan import ClusterOption, PlanSettings, candidates
from autofe.scheduler.policies import (
    ChoiceContext,
    Policy,
    hourly_usd,
    placement,
)
from autofe.scheduler.queue import ORDERS, Ledger, preemption_allowance, window, worst_case_usd
from autofe.scheduler.report import (
    LogEntry,
    SimulationResult,
    spend_by_budget,
    summarize,
)
from autofe.scheduler.runtime import (
    Resume,
    expected_loss_s,
    remaining_high_s,
    should_fall_back,
    upgrade_choice,
    wall_s,
)
from autofe.scheduler.simulate_state import ClusterState, Meter, RunState, job_record, same_kind
from autofe.scheduler.simulate_world import SimulationSettings, seen_job

Claims = dict[str, list[float]]
"""Per budget and priority (index 0 for P0), the expected USD of the jobs held for it in this
dispatch round."""
EPS = 1e-9


class Engine:
    """The event loop and its handlers. One handler per event kind; shared state lives here
    because every event touches the same fleet, budgets and queue."""

    def __init__(
        self, jobset: JobSet, catalog: Catalog, policy: Policy, settings: SimulationSettings
    ) -> None:
        self.catalog = catalog
        self.policy = policy
        self.settings = settings
        timeout = idle_timeout(settings.fleet, policy.keeps_warm, settings.startup_s)
        self.fleet = replace(settings.fleet, idle_timeout_s=timeout)
        self.idle_timeout_s = timeout
        self.adaptive_warm = settings.fleet.idle_timeout_s is None
        self.dispatched: deque[tuple[float, RunState]] = deque()  # chosen recently, for the rate
        self.t0 = min((job.submit for job in jobset.jobs), default=0.0)
        self.ctx = ChoiceContext(
            catalog,
            settings.startup_s,
            settings.preemption_multiplier,
            settings.seed,
            settings.fallback_after,
        )
        self.hard = settings.budget_mode == "hard"
        self.ledger = Ledger({b.name: b for b in jobset.budgets})
        self.runs = {
            job.job_id: RunState(job, seen_job(job, settings, policy.sees_truth))
            for job in jobset.jobs
        }
        self.dependents: dict[str, list[str]] = {job.job_id: [] for job in jobset.jobs}
        for job in jobset.jobs:
            for dep in job.depends_on:
                self.dependents[dep].append(job.job_id)
        self.heap: list[tuple[float, int, str, str, int]] = []
        self.seq = 0
        self.log: list[LogEntry] = []
        self.clusters: dict[str, ClusterState] = {}
        self.cluster_seq = 0
        self.spent_by_account: dict[str, float] = {}
        self.idle_cost = 0.0
        self.budget_holds = 0
        self.windows_scheduled: set[float] = set()
        self.idle_windows = 0
        self.now = 0.0
        # indexes by status, so an event costs what is queued or running, not the whole trace
        self.queued: dict[str, RunState] = {}
        self.running: dict[str, RunState] = {}
        self.nodes_in_flight = 0

    # --- the loop -------------------------------------------------------------------------

    def run(self) -> SimulationResult:
        for run in self.runs.values():
            self._push(run.job.submit, "arrive", run.job.job_id, 0)
        handlers = {
            "arrive": self._arrive,
            "up": self._up,
            "ckpt": self._checkpoint,
            "complete": self._complete,
            "preempt": self._preempt,
            "check": self._check,
            "reserve": self._reserve_more,
            "expire": self._expire,
            "window": self._window,
        }
        while self.heap:
            # every event at the same instant is handled before the queue is dispatched, so
            # simultaneous arrivals compete by priority, not by event order
            t = self.heap[0][0]
            self._accrue_all(t)
            self.now = t
            while self.heap and self.heap[0][0] == t:
                _, _, kind, key, token = heapq.heappop(self.heap)
                handlers[kind](key, token)
            self._dispatch()
        return self._result()

    def _push(self, t: float, kind: str, key: str, token: int) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, kind, key, token))

    def _note(self, kind: str, run: RunState, detail: str = "") -> None:
        self.log.append(LogEntry(self.now, kind, run.job.job_id, run.progress, run.saved, detail))

    def _set(self, run: RunState, status: str) -> None:
        """Change a run's status, keeping the queued and running indexes in step."""
        for index, name in ((self.queued, "queued"), (self.running, "running")):
            if status == name:
                index[run.job.job_id] = run
            else:
                index.pop(run.job.job_id, None)
        run.status = status

    def _live(self, key: str, token: int) -> RunState | None:
        run = self.runs[key]
        return run if run.token == token and run.status == "running" else None

    # --- arrivals and dependencies ------------------------------------------------------------

    def _arrive(self, job_id: str, token: int) -> None:
        run = self.runs[job_id]
        if run.status != "pending":
            return
        self._set(run, "waiting")
        self._note("arrive", run)
        deps = [self.runs[d] for d in run.job.depends_on]
        if all(d.status == "done" for d in deps):
            self._ready(run)

    def _ready(self, run: RunState) -> None:
        self._set(run, "queued")
        run.ready_at = self.now
        self._note("ready", run)

    def _finished(self, run: RunState) -> None:
        for dep_id in self.dependents[run.job.job_id]:
            dep = self.runs[dep_id]
            if run.status != "done":
                self._cancel(dep, f"dependency {run.job.job_id} {run.status}")
            elif dep.status == "waiting" and all(
                self.runs[d].status == "done" for d in dep.job.depends_on
            ):
                self._ready(dep)

    def _cancel(self, run: RunState, why: str) -> None:
        if run.done_or_failed or run.status == "running":
            return
        self._set(run, "cancelled")
        run.token += 1
        self._note("cancel", run, why)
        self._finished(run)

    # --- dispatch -----------------------------------------------------------------------------

    def _dispatch(self) -> None:
        if not self.queued or not self._room_for_any():
            return
        order = ORDERS[self.policy.order]
        shares = {
            account: self.ledger.share(account, self.spent_by_account)
            for account in {r.job.account for r in self.queued.values()}
        }
        keyed = [
            (order(r.seen, self.now, self._work_s(r), shares[r.job.account]), r)
            for r in self.queued.values()
        ]
        claimed: Claims = {}
        for _, run in sorted(keyed, key=lambda kr: kr[0]):
            if run.cand is None:
                self._choose(run)
            outcome = self._try_start(run, claimed)
            if outcome == "blocked":
                break

    def _room_for_any(self) -> bool:
        """Whether any queued job could get nodes now (a full fleet skips the dispatch)."""
        idle = any(c.job_id is None for c in self.clusters.values())
        free = self.fleet.max_nodes - self.nodes_in_flight
        return idle or any(free >= self._nodes_needed(r) for r in self.queued.values())

    def _nodes_needed(self, run: RunState) -> int:
        return run.least_nodes if run.cand is None else run.cand.shape.nodes

    def _choose(self, run: RunState) -> None:
        place = self.policy.choose(run.seen, self.now, self.ctx)
        run.cand = self._candidate(run, place)
        run.fallback_after = place.fallback_after
        self.dispatched.append((self.now, run))

    def _candidate(self, run: RunState, place: Placement) -> ClusterOption:
        for cand in self._options(run):
            offer = cand.offer
            if (cand.shape, offer.cloud, offer.region, cand.market) == (
                place.shape,
                place.cloud,
                place.region,
                place.market,
            ):
                return cand
        raise ScheduleError(
            f"policy {self.policy.name} chose {place.shape.key} in {place.cloud}/"
            f"{place.region}, which is not one of its shapes and offers",
            run.job.job_id,
        )

    def _options(self, run: RunState) -> list[ClusterOption]:
        if run.options is None:
            run.options = candidates(run.seen, self.catalog)
        return run.options

    def _work_s(self, run: RunState) -> float:
        if run.cand is not None:
            return (1.0 - run.saved) * run.cand.estimate.high_s
        return run.least_high_s

    def _try_start(self, run: RunState, claimed: Claims) -> str:
        """Start ``run`` if the fleet and its budgets allow: "started", "held" (budget; later
        jobs may still start) or "blocked" (no room; nothing behind it starts)."""
        assert run.cand is not None
        warm = self._warm_for(run)
        release: list[ClusterState] = []
        if warm is not None:
            options = [self._candidate(run, placement(warm.cand, run.fallback_after))]
        else:
            room = room_from_idle(run.cand.shape.nodes, self._in_flight(), self._idle(), self.fleet)
            if room is None:
                return "blocked"
            release = [self.clusters[w.name] for w in room]
            options = self._budget_options(run, run.cand)
        admitted = self._admit(run, options, warm is not None, claimed)
        if admitted is None:
            return "held"
        for cluster in release:
            self._release_cluster(cluster)
        self._start(run, admitted[0], warm, admitted[1])
        return "started"

    def _admit(
        self, run: RunState, options: list[ClusterOption], warm: bool, claimed: Claims
    ) -> tuple[ClusterOption, float] | None:
        """The first option every budget of the run can reserve the worst case of (with room
        left for held jobs of higher tiers), and the reservation; ``None``: held."""
        names = self.ledger.charged_to(run.job)
        if not self.hard or not names:
            return options[0], math.inf
        prio = run.job.priority
        ahead = sum(sum(claimed.get(n, [])[:prio]) for n in names)
        room = self.ledger.headroom(names, self.now)
        if run.held and room <= run.held_at[0] + EPS and ahead >= run.held_at[1] - EPS:
            self._hold(run, names, options[0], claimed)  # nothing freed since: still held
            return None
        for option in options:
            need = self._worst(run, option, warm)
            if need + ahead <= room + EPS and self.ledger.reserve(names, need, self.now):
                if option is not options[0]:
                    run.fallback_after = None
                    self._note("to-spot", run, "budget near its cap")
                return option, need
        run.held_at = (room, ahead)
        self._hold(run, names, options[0], claimed)
        return None

    def _budget_options(self, run: RunState, cand: ClusterOption) -> list[ClusterOption]:
        """The run's own candidate, then (P2/P3 on-demand only) the same shape on spot."""
        if run.job.priority < 2 or cand.market != "on-demand":
            return [cand]
        spot = [c for c in self._options(run) if c.market == "spot" and c.shape == cand.shape]
        return [cand, *sorted(spot, key=hourly_usd)[:1]]

    def _hold(
        self, run: RunState, names: tuple[str, ...], cand: ClusterOption, claimed: Claims
    ) -> None:
        """Keep a job queued for budget: it claims its expected cost ahead of lower tiers and
        is retried when reservations free up or a new budget period begins."""
        expected = hourly_usd(cand) * (self.settings.startup_s + cand.estimate.p50_s) / 3600
        for name in names:
            claimed.setdefault(name, [0.0] * len(TIERS))[run.job.priority] += expected
        if not run.held:
            run.held = True
            self.budget_holds += 1
            self._note("hold", run, "budget")
        need = self._worst(run, cand, False)
        if any(need > self.ledger.budgets[n].usd + EPS for n in names):
            self._give_up(run)
            return
        if self.idle_windows >= 2:
            return
        for name in names:
            period = self.ledger.budgets[name].period_s
            nxt = (window(self.now, period) + 1) * period
            if nxt not in self.windows_scheduled:
                self.windows_scheduled.add(nxt)
                self._push(nxt, "window", name, 0)

    def _give_up(self, run: RunState) -> None:
        self._set(run, "held")
        run.token += 1
        self._note("hold", run, "worst-case cost exceeds the budget cap")
        self._finished(run)

    def _worst(self, run: RunState, cand: ClusterOption, warm: bool) -> float:
        """The attempt's worst case: its remaining work's high estimate on ``cand``, start-up
        (none on a warm cluster), and on spot the restarts of a 95 % preemption allowance."""
        startup = 0.0 if warm else self.settings.startup_s
        work = (1.0 - run.saved) * cand.estimate.high_s
        allowance = preemption_allowance(self._rate_per_s(cand) * (startup + work))
        return worst_case_usd(work, hourly_usd(cand), startup, run.job.checkpoint, allowance)

    def _rate_per_s(self, cand: ClusterOption) -> float:
        if cand.market != "spot":
            return 0.0
        per_h = cand.offer.interruptions_per_h * cand.shape.nodes
        return per_h * self.settings.preemption_multiplier / 3600

    # --- fleet ------------------------------------------------------------------------------

    def _in_flight(self) -> int:
        return self.nodes_in_flight

    def _idle(self) -> list[WarmCluster]:
        return [c.warm() for c in self.clusters.values() if c.job_id is None]

    def _warm_for(self, run: RunState) -> ClusterState | None:
        """An idle cluster to batch the run onto (the shape and market it was placed on),
        when cheaper than its own cluster's start-up and run and still on time at the tier's
        target quantile. Only the chosen shape: the chooser already weighed each shape's risk,
        and picking among warm shapes by median would favour the most optimistic prediction."""
        assert run.cand is not None
        if self.idle_timeout_s <= 0:
            return None
        choices = []
        for c in self.clusters.values():
            est = run.seen.shapes.get(c.cand.shape.key)
            if c.job_id is None and est is not None and same_kind(c.cand, run.cand):
                left = 1.0 - run.saved
                high = duration_quantile(est, PlanSettings().target(run.job.tier))
                rest = replace(est, p50_s=est.p50_s * left, high_s=high * left)
                choices.append(WarmChoice(c.warm(), rest))
        if not choices:
            return None
        own_s = self.settings.startup_s + (1.0 - run.saved) * run.cand.estimate.p50_s
        ckpt = run.job.checkpoint
        restore = ckpt.restore_s if ckpt is not None and run.saved > 0 else 0.0
        picked = pick_warm(
            choices, hourly_usd(run.cand) * own_s / 3600, self.now, run.job.deadline, restore
        )
        return None if picked is None else self.clusters[picked.name]

    def _release_cluster(self, cluster: ClusterState) -> None:
        if cluster.meter is not None:
            self.idle_cost += self._close(cluster.meter)
            cluster.meter = None
        cluster.token += 1
        if self.clusters.pop(cluster.cid, None) is not None:
            self.nodes_in_flight -= cluster.nodes

    def _free_cluster(self, run: RunState, keep_warm: bool) -> None:
        """A job leaves its cluster: kept warm (if set and affordable) or released."""
        cluster = run.cluster
        run.cluster = None
        if cluster is None:
            return
        cluster.job_id = None
        cluster.idle_since = self.now
        names = self.ledger.charged_to(run.job)
        usd = idle_reservation_usd(cluster.hourly, self.fleet)
        keep = keep_warm and self.idle_timeout_s > 0 and self._worth_keeping(cluster)
        if not keep or not self._reserve(names, usd):
            self._release_cluster(cluster)
            return
        cluster.meter = Meter(names, run.job.account, cluster.hourly, self.now, usd)
        cluster.token += 1
        self._push(self.now + self.idle_timeout_s, "expire", cluster.cid, cluster.token)

    def _worth_keeping(self, cluster: ClusterState) -> bool:
        """An explicit idle timeout keeps every freed cluster; the policy default only one
        that jobs chosen in the last ``rate_window_s`` would have batched onto often enough,
        each such job counted as a share among the idle clusters it would also have taken."""
        if not self.adaptive_warm:
            return True
        since = self.now - self.fleet.rate_window_s
        while self.dispatched and self.dispatched[0][0] < since:
            self.dispatched.popleft()
        window = min(self.fleet.rate_window_s, self.now - self.t0)
        idle = [c for c in self.clusters.values() if c.job_id is None and c is not cluster]
        eligible = 0.0
        for _, run in self.dispatched:
            if self._would_batch(run, cluster):  # shared with the idle clusters it also fits
                eligible += 1.0 / (1 + sum(self._would_batch(run, c) for c in idle))
        return worth_keeping(eligible, window, self.settings.startup_s)

    def _would_batch(self, run: RunState, cluster: ClusterState) -> bool:
        """Whether ``run``, as first chosen, would have taken ``cluster`` had it been warm."""
        est = run.seen.shapes.get(cluster.cand.shape.key)
        if run.cand is None or est is None or not same_kind(cluster.cand, run.cand):
            return False
        own = hourly_usd(run.cand) * (self.settings.startup_s + run.cand.estimate.p50_s) / 3600
        return pick_warm([WarmChoice(cluster.warm(), est)], own, self.now, None) is not None

    def _expire(self, cid: str, token: int) -> None:
        cluster = self.clusters.get(cid)
        if cluster is None or cluster.token != token or cluster.job_id is not None:
            return
        warm_nodes = sum(c.nodes for c in self.clusters.values() if c.job_id is None)
        work_left = any(not r.done_or_failed for r in self.runs.values())
        meter = cluster.meter
        if work_left and meter and keep_past_timeout(cluster.warm(), warm_nodes, self.fleet):
            usd = idle_reservation_usd(cluster.hourly, self.fleet)
            if self._reserve(meter.names, usd):
                meter.reserved += usd
                self._push(self.now + self.idle_timeout_s, "expire", cid, token)
                return
        self._release_cluster(cluster)

    # --- running a job ----------------------------------------------------------------------

    def _start(
        self, run: RunState, cand: ClusterOption, warm: ClusterState | None, reserved: float
    ) -> None:
        true_s = run.job.shapes[cand.shape.key].true_s
        if true_s is None:
            raise ScheduleError(
                f"policy {self.policy.name} chose shape {cand.shape.key!r}, which has no "
                "true_s in the trace (the simulator needs the real runtime)",
                run.job.job_id,
            )
        run.cand = cand
        if warm is not None:
            self.idle_cost += self._close(warm.meter) if warm.meter else 0.0
            warm.meter = None
            warm.token += 1
            warm.job_id = run.job.job_id
            run.batched += 1
            run.cluster = warm
        else:
            run.cluster = self._new_cluster(cand, run.job.job_id)
        self._begin(run, warm is None, reserved)

    def _new_cluster(self, cand: ClusterOption, job_id: str) -> ClusterState:
        self.cluster_seq += 1
        cid = f"c{self.cluster_seq}"
        self.clusters[cid] = ClusterState(cid, cand, hourly_usd(cand), job_id)
        self.nodes_in_flight += cand.shape.nodes
        return self.clusters[cid]

    def _begin(self, run: RunState, cold: bool, reserved: float) -> None:
        assert run.cand is not None and run.cluster is not None
        self._set(run, "running")
        run.held = False
        self.idle_windows = 0
        run.token += 1
        run.attempt += 1
        run.seg_start = self.now
        run.progress = run.saved
        if run.first_start is None:
            run.first_start = self.now
        names = self.ledger.charged_to(run.job)
        run.meter = Meter(names, run.job.account, run.cluster.hourly, self.now, reserved)
        self._note("start", run, self._describe(run, cold))
        ckpt = run.job.checkpoint
        restore = ckpt.restore_s if ckpt is not None and run.saved > 0 else 0.0
        run.phase, run.phase_start = "up", self.now
        self._push(
            self.now + (self.settings.startup_s if cold else 0.0) + restore,
            "up",
            run.job.job_id,
            run.token,
        )
        rate = self._rate_per_s(run.cand)
        if rate > 0:
            u = random.Random(f"{self.settings.seed}/{run.job.job_id}/{run.attempt}").random()
            self._push(self.now - math.log(1.0 - u) / rate, "preempt", run.job.job_id, run.token)
        self._schedule_reserve(run)

    def _describe(self, run: RunState, cold: bool) -> str:
        assert run.cand is not None
        c = run.cand
        where = f"{c.shape.key} {c.offer.cloud}/{c.offer.region} {c.market}"
        return where if cold else f"{where} warm"

    def _true_s(self, run: RunState) -> float:
        assert run.cand is not None
        true_s = run.job.shapes[run.cand.shape.key].true_s
        assert true_s is not None
        return true_s

    def _up(self, job_id: str, token: int) -> None:
        run = self._live(job_id, token)
        if run is None:
            return
        run.phase, run.phase_start = "work", self.now
        self._next_milestone(run)
        if self.policy.runtime.upgrade and run.job.deadline is not None:
            self._push(self.now + self.policy.runtime.check_every_s, "check", job_id, token)

    def _next_milestone(self, run: RunState) -> None:
        """Schedule the next checkpoint (work to its boundary, then the write) or completion."""
        true_s = self._true_s(run)
        ckpt = run.job.checkpoint
        run.boundary = 1.0
        if ckpt is not None:
            done_s = run.progress * true_s
            nxt = (math.floor(done_s / ckpt.interval_s + EPS) + 1) * ckpt.interval_s
            if nxt < true_s - EPS:
                run.boundary = nxt / true_s
                at = self.now + nxt - done_s + ckpt.write_s
                self._push(at, "ckpt", run.job.job_id, run.token)
                return
        self._push(self.now + (1.0 - run.progress) * true_s, "complete", run.job.job_id, run.token)

    def _progress_now(self, run: RunState) -> float:
        if run.phase != "work":
            return run.progress
        moved = (self.now - run.phase_start) / self._true_s(run)
        return min(run.progress + moved, run.boundary)

    def _advance(self, run: RunState, progress: float) -> None:
        """Book work done since the phase started (for progress re-estimation)."""
        if run.phase == "work" and progress > run.progress:
            run.gained += progress - run.progress
            run.worked_s += (progress - run.progress) * self._true_s(run)
        run.progress = progress
        run.phase_start = self.now

    def _checkpoint(self, job_id: str, token: int) -> None:
        run = self._live(job_id, token)
        if run is None:
            return
        self._advance(run, run.boundary)
        run.saved = run.progress
        self._note("checkpoint", run)
        self._next_milestone(run)

    def _complete(self, job_id: str, token: int) -> None:
        run = self._live(job_id, token)
        if run is None:
            return
        self._advance(run, 1.0)
        self._stop_run(run, "done", keep_warm=True)
        self._note("complete", run)
        self._finished(run)

    def _stop_run(self, run: RunState, status: str, keep_warm: bool) -> None:
        """End the run's current attempt: close its meter, leave its cluster."""
        run.token += 1
        self._set(run, status)
        if run.meter is not None:
            run.cost += self._close(run.meter)
            run.meter = None
        if run.cand is not None and run.cand.market == "spot":
            run.spot_s += self.now - run.seg_start
        if status in ("done", "stopped", "failed"):
            run.end = self.now
        self._free_cluster(run, keep_warm)

    def _preempt(self, job_id: str, token: int) -> None:
        run = self._live(job_id, token)
        if run is None:
            return
        self._advance(run, self._progress_now(run))
        run.preemptions += 1
        self._note("preempt", run, "work since the last checkpoint is lost")
        run.progress = run.saved
        if run.preemptions >= self.settings.max_preemptions:
            self._stop_run(run, "failed", keep_warm=False)
            self._note("fail", run, f"given up after {run.preemptions} preemptions")
            self._finished(run)
            return
        self._stop_run(run, "queued", keep_warm=False)
        assert run.cand is not None
        place = placement(run.cand, run.fallback_after)
        if should_fall_back(place, run.preemptions, run.spot_s, self.policy.runtime):
            run.cand = self._on_demand(run, run.cand)
            run.fallback_after = None
            run.fallbacks += 1
            self._note("fallback", run, self._describe(run, True))

    def _on_demand(self, run: RunState, cand: ClusterOption) -> ClusterOption:
        return ClusterOption(cand.shape, cand.estimate, cand.offer, "on-demand")

    def _check(self, job_id: str, token: int) -> None:
        """Deadline-aware upgrade: re-estimate the rest from progress; move if at risk."""
        run = self._live(job_id, token)
        if run is None or run.upgrades >= self.policy.runtime.max_upgrades:
            return
        assert run.cand is not None
        self._advance(run, self._progress_now(run))
        rest = remaining_high_s(run.cand.estimate, run.progress, run.gained, run.worked_s)
        ckpt = run.job.checkpoint
        rest_wall = wall_s(rest, ckpt)
        projected = (
            self.now
            + rest_wall
            + expected_loss_s(self._rate_per_s(run.cand), rest_wall, self.settings.startup_s, ckpt)
        )
        scale = rest / max((1.0 - run.progress) * run.cand.estimate.high_s, EPS)
        resume = Resume(run.cand, run.saved, self.settings.startup_s, max(scale, 1.0))
        target = upgrade_choice(
            self.now, run.job.deadline, projected, self._options(run), resume, ckpt
        )
        if target is not None and self._can_move(run, target):
            self._move(run, target)
        else:
            self._push(self.now + self.policy.runtime.check_every_s, "check", job_id, token)

    def _can_move(self, run: RunState, target: ClusterOption) -> bool:
        names = self.ledger.charged_to(run.job)
        if not self.hard or not names or run.meter is None:
            return True
        need = self._worst(run, target, False)
        return need <= self.ledger.headroom(names, self.now) + run.meter.reserved + EPS

    def _move(self, run: RunState, target: ClusterOption) -> None:
        run.progress = run.saved
        self._stop_run(run, "queued", keep_warm=False)
        run.cand, run.fallback_after = target, None
        run.gained = run.worked_s = 0.0
        run.upgrades += 1
        self._note("upgrade", run, self._describe(run, True))

    # --- budgets ------------------------------------------------------------------------------

    def _reserve(self, names: tuple[str, ...], usd: float) -> bool:
        if not self.hard or not names:
            return True
        return self.ledger.reserve(names, usd, self.now)

    def _accrue(self, meter: Meter, t: float) -> float:
        if t <= meter.since:
            return 0.0
        cost = meter.hourly * (t - meter.since) / 3600.0
        if meter.names:
            self.ledger.charge(meter.names, meter.hourly, meter.since, t)
            if self.hard:
                self.ledger.release(meter.names, min(cost, meter.reserved))
        meter.reserved -= cost
        meter.total += cost
        meter.since = t
        self.spent_by_account[meter.account] = self.spent_by_account.get(meter.account, 0.0) + cost
        return cost

    def _accrue_all(self, t: float) -> None:
        for run in self.running.values():
            if run.meter is not None:
                self._accrue(run.meter, t)
        for cluster in self.clusters.values():
            if cluster.meter is not None:
                self._accrue(cluster.meter, t)

    def _close(self, meter: Meter) -> float:
        """Settle a meter now: pay to now, give back what is left of its reservation."""
        self._accrue(meter, self.now)
        if self.hard and meter.names and math.isfinite(meter.reserved):
            self.ledger.release(meter.names, max(meter.reserved, 0.0))
        meter.reserved = 0.0
        return meter.total

    def _schedule_reserve(self, run: RunState) -> None:
        meter = run.meter
        if meter is None or not self.hard or not meter.names or not math.isfinite(meter.reserved):
            return
        if meter.hourly > 0:
            at = meter.since + max(meter.reserved, 0.0) * 3600.0 / meter.hourly
            self._push(at, "reserve", run.job.job_id, run.token)

    def _reserve_more(self, job_id: str, token: int) -> None:
        """The run used up its reservation: reserve its re-estimated rest, or stop it."""
        run = self._live(job_id, token)
        if run is None or run.meter is None:
            return
        assert run.cand is not None
        self._advance(run, self._progress_now(run))
        rest = remaining_high_s(run.cand.estimate, run.progress, run.gained, run.worked_s)
        need = max(
            worst_case_usd(
                rest, run.cluster.hourly if run.cluster else 0.0, 0.0, run.job.checkpoint
            ),
            run.meter.hourly * 60.0 / 3600.0,
        )
        if self.ledger.reserve(run.meter.names, need, self.now):
            run.meter.reserved += need
            self._schedule_reserve(run)
            return
        self._stop_run(run, "stopped", keep_warm=False)
        self._note("stop", run, "its budget's cap would be crossed")
        self._finished(run)

    def _window(self, name: str, token: int) -> None:
        """A budget period begins: held jobs are retried by the dispatch that follows (two
        periods in a row with nothing running and nothing admitted end the retries)."""
        if not self.running:
            self.idle_windows += 1

    # --- the result ---------------------------------------------------------------------------

    def _result(self) -> SimulationResult:
        for run in self.runs.values():
            if run.status == "queued":
                self._set(run, "held")
                self._note("hold", run, "never admitted before the trace ended")
            elif run.status in ("pending", "waiting"):
                self._set(run, "cancelled")
                self._note("cancel", run, "a dependency never finished")
        records = tuple(job_record(run) for run in self.runs.values())
        summary = summarize(
            self.policy.name,
            records,
            self.idle_cost,
            self.ledger.overrun_usd(),
            self.budget_holds,
        )
        return SimulationResult(
            self.policy.name,
            records,
            tuple(self.log),
            summary,
            spend_by_budget(self.ledger.spent),
        )
