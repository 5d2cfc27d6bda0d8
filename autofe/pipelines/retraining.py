"""A firing becomes a retraining request to the scheduler, at most one open per home.

The request is a job like any an orchestrator submits to ``/v1/jobs``, and goes through the
same :func:`autofe.scheduler.store.submit_document` (validated, planned, stored with a
handle): the job ``autofe-nightly`` on the configured shape, its duration from autofe's own
past nights (:mod:`autofe.pipelines.retraining_estimate`), in the retraining account.

Tier rules (docs/nightly.md, "Retraining triggers"):

- **P0** (degradation: users are being served bad predictions now): on-demand only, since a
  preemption would keep the bad model serving longer; due in ``deadline_s["P0"]``; never held
  by the budget (an overrun shows in the account's spend).
- **P1** (drift, skew): due within the working day; any market; never held.
- **P2** (the scheduled nightly): due by the next night; any market, so the planner's
  cheapest plan is spot where the catalog has a spot price; **held** when its worst case
  (the plan's high completion time at its hourly price) does not fit what is left of the
  account's budget this period. A hold is recorded and retried at every later check.

Back-pressure: while a request is queued, a more urgent firing raises its tier (and a
``full`` firing its mode) in place (:meth:`JobStore.retier`); any other firing, or one while
the retraining runs, is attached to it. ``HOME/retraining.json`` names the open handle and a
held request; the store is the truth about its state.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from autofe.json_file import write_json
from autofe.pipelines.home import Home
from autofe.pipelines.nightly_records import nightly_history
from autofe.pipelines.retraining_estimate import RetrainKind, estimate_retraining
from autofe.pipelines.triggers_signals import Kind, TriggerSettings
from autofe.scheduler.catalog import Catalog, load_catalog
from autofe.scheduler.jobfile import FORMAT, Budget, parse_jobs
from autofe.scheduler.jobs import TIERS, Tier
from autofe.scheduler.plan import plan_job
from autofe.scheduler.store import FINISHED, JobRecord, JobStore, UnknownHandle, submit_document

JOB_ID = "autofe-nightly"
TIER_OF: dict[Kind, Tier] = {"degradation": "P0", "drift": "P1", "skew": "P1", "scheduled": "P2"}
HELD_TIERS = frozenset({"P2", "P3"})
"""Tiers a budget holds; P0 and P1 retrainings run over it (and the overrun is reported)."""
Action = Literal["submitted", "retiered", "attached", "held"]


@dataclass(frozen=True)
class Outcome:
    """What a firing did to the scheduler."""

    action: Action
    handle: str | None
    tier: Tier
    mode: RetrainKind
    reason: str
    plan: dict[str, Any] | None = None


@dataclass(frozen=True)
class _Context:
    """Where and when a request is made: the home, its store, the settings and catalog."""

    home: Home
    store: JobStore
    settings: TriggerSettings
    now: float
    catalog: Catalog


def request_retraining(
    home: Home,
    kind: Kind,
    mode: RetrainKind,
    settings: TriggerSettings,
    now: float,
    catalog: Catalog | None = None,
) -> Outcome:
    """Submit, raise, attach to or hold the home's retraining for one firing of ``kind``."""
    ctx = _Context(home, JobStore.in_home(home.root), settings, now, catalog or load_catalog())
    state = _read_state(home)
    tier = TIER_OF[kind]
    open_job = _open(ctx.store, state.get("handle"), now)
    if open_job is not None:
        return _raise_or_attach(ctx, open_job, tier, mode)
    held = state.get("held") or {}
    if held:  # a held request and a new firing: the more urgent of the two goes forward
        tier = _urgent(tier, held.get("tier", tier))
        mode = "full" if "full" in (mode, held.get("mode")) else mode
    return _submit_or_hold(ctx, kind, tier, mode)


def retry_held(
    home: Home, settings: TriggerSettings, now: float, catalog: Catalog | None = None
) -> Outcome | None:
    """Try a held request again (the budget may have freed); None when nothing is held."""
    held = _read_state(home).get("held")
    if not held:
        return None
    ctx = _Context(home, JobStore.in_home(home.root), settings, now, catalog or load_catalog())
    return _submit_or_hold(ctx, held["kind"], held["tier"], held["mode"])


def open_request(home: Home, now: float | None = None) -> JobRecord | None:
    """The home's queued or running retraining, if any."""
    if not home.scheduler_store.is_file():
        return None
    return _open(JobStore.in_home(home.root), _read_state(home).get("handle"), now)


def held_request(home: Home) -> dict[str, Any] | None:
    """The held request (its tier, mode, reason and since when), if any."""
    held = _read_state(home).get("held")
    return dict(held) if held else None


def _raise_or_attach(ctx: _Context, job: JobRecord, tier: Tier, mode: RetrainKind) -> Outcome:
    current: Tier = job.tier  # type: ignore[assignment]  # stored tiers are checked on submit
    mode_now: RetrainKind = job.request.get("labels", {}).get("mode", "incremental")
    wanted_tier, wanted_mode = (
        _urgent(tier, current),
        "full" if "full" in (mode, mode_now) else mode_now,
    )
    if job.state != "queued" or (wanted_tier, wanted_mode) == (current, mode_now):
        why = f"retraining {job.handle} is already {job.state} ({current}, {mode_now})"
        return Outcome("attached", job.handle, current, mode_now, why)
    item = _item(ctx, wanted_tier, wanted_mode, "raised")
    plan = plan_job(
        parse_jobs({"jobs": [item]}, ctx.catalog, ctx.now).jobs[0], ctx.catalog, ctx.now
    )
    why = f"raised from {current} ({mode_now}) to {wanted_tier} ({wanted_mode})"
    record = ctx.store.retier(job.handle, item, plan, ctx.now, reason=why)
    return Outcome("retiered", job.handle, wanted_tier, wanted_mode, why, _plan_of(record))


def _submit_or_hold(ctx: _Context, kind: Kind, tier: Tier, mode: RetrainKind) -> Outcome:
    home, settings, now = ctx.home, ctx.settings, ctx.now
    item = _item(ctx, tier, mode, kind)
    document = _document(item, settings)
    jobs = parse_jobs(document, ctx.catalog, now)
    plan = plan_job(jobs.jobs[0], ctx.catalog, now)
    worst = plan.hourly_usd * plan.high_s / 3600.0
    left = _left(ctx.store, jobs.budgets, settings.account, now)
    if tier in HELD_TIERS and left is not None and worst > left:
        why = (
            f"held: budget {settings.account!r} has ${max(left, 0.0):.2f} left this period and "
            f"the {tier} retraining's worst case is ${worst:.2f}; retried at every check"
        )
        since = (_read_state(home).get("held") or {}).get("since", now)
        held = {"kind": kind, "tier": tier, "mode": mode, "reason": why, "since": since}
        _write_state(home, {"handle": None, "held": held})
        return Outcome("held", None, tier, mode, why)
    (record,) = submit_document(ctx.store, document, ctx.catalog, now)
    _write_state(home, {"handle": record.handle, "held": None})
    over = "" if left is None or worst <= left else f" (over budget: ${left:.2f} left)"
    why = f"{tier} {mode} retraining {record.plan_line()}{over}"
    return Outcome("submitted", record.handle, tier, mode, why, _plan_of(record))


def _left(store: JobStore, budgets: Sequence[Budget], account: str, now: float) -> float | None:
    """What the account has left this period: the document's budget replaces a stored one
    of its name (as submitting it will); None when neither sets one."""
    for budget in budgets:
        if budget.name == account:
            return store.remaining(budget, now)
    return store.summary(now).budget_remaining.get(account)


def _item(ctx: _Context, tier: Tier, mode: RetrainKind, why: str) -> dict[str, Any]:
    """The retraining as a job object of the jobs format (docs/scheduler.md)."""
    home, settings, now = ctx.home, ctx.settings, ctx.now
    estimate = estimate_retraining(home.root, mode, settings.budget_seconds)
    deadline = now + max(settings.deadline_s[tier], 2.0 * estimate.high_s + 600.0)
    item: dict[str, Any] = {
        "job_id": JOB_ID,
        "submit": now,
        "tier": tier,
        "account": settings.account,
        "deadline": deadline,
        "shapes": {
            settings.shape: {
                "p50_s": estimate.p50_s,
                "low_s": estimate.low_s,
                "high_s": estimate.high_s,
            }
        },
        "labels": {
            "autofe": "retraining",
            "mode": mode,
            "trigger": why,
            "estimate": f"{estimate.source} ({estimate.nights} nights)",
            "command": _command(home, mode),
        },
    }
    if tier == "P0":
        item["markets"] = ["on-demand"]
    return item


def _document(item: dict[str, Any], settings: TriggerSettings) -> dict[str, Any]:
    budgets = []
    if settings.budget_usd is not None:
        budgets = [
            {
                "name": settings.account,
                "usd": settings.budget_usd,
                "period_s": settings.budget_period_s,
            }
        ]
    return {"format": FORMAT, "source": "autofe triggers", "budgets": budgets, "jobs": [item]}


def _command(home: Home, mode: RetrainKind) -> str:
    """The command that runs the request (``--handle`` is the handle it was given)."""
    parts = ["autofe", "nightly", "--home", str(home.root)]
    workspace = _last_workspace(home)
    if workspace is not None:
        parts += ["--workspace", workspace]
    return shlex.join([*parts, "--mode", mode]) + " --handle HANDLE"


def _last_workspace(home: Home) -> str | None:
    """The workspace the latest night ingested (the request reruns on it)."""
    for record in reversed(nightly_history(home.root)):
        if record.get("workspace"):
            return str(record["workspace"])
    return None


def _urgent(a: str, b: str) -> Tier:
    return TIERS[min(TIERS.index(a), TIERS.index(b))]


def _open(store: JobStore, handle: str | None, now: float | None) -> JobRecord | None:
    if not handle:
        return None
    try:
        record = store.get(handle, now)
    except UnknownHandle:
        return None
    return None if record.state in FINISHED else record


def _plan_of(record: JobRecord) -> dict[str, Any]:
    """The plan as a firing records it: where, at what expected cost and risk."""
    plan = record.plan
    return {
        "line": record.plan_line(),
        "shape": plan.placement.shape.key,
        "cloud": plan.placement.cloud,
        "region": plan.placement.region,
        "market": plan.placement.market,
        "expected_cost_usd": round(plan.expected_cost_usd, 6),
        "p50_s": round(plan.p50_s, 3),
        "high_s": round(plan.high_s, 3),
        "p_deadline": plan.p_deadline,
    }


def _read_state(home: Home) -> dict[str, Any]:
    try:
        state = json.loads(home.retraining.read_text())
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def _write_state(home: Home, state: dict[str, Any]) -> None:
    state = {**state, "updated": datetime.now(UTC).isoformat(timespec="seconds")}
    write_json(home.retraining, state)
