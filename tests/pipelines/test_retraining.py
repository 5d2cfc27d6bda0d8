"""Retraining requests: tiers and markets by severity, one open per home, budget holds.

Plans use the shipped instance catalog (the retraining shape m4.2xlarge x1 has spot prices in
three AWS regions) on the live clock, as ``autofe serve`` submits them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autofe.pipelines.home import Home
from autofe.pipelines.retraining import (
    held_request,
    open_request,
    request_retraining,
    retry_held,
)
from autofe.pipelines.triggers_signals import TriggerSettings
from autofe.scheduler.catalog import load_catalog
from autofe.scheduler.store import JobStore

NOW = 1_800_000_000.0
CATALOG = load_catalog()
SETTINGS = TriggerSettings()


@pytest.fixture
def home(tmp_path: Path) -> Home:
    return Home(tmp_path)


def test_degradation_is_p0_on_demand_and_the_nightly_p2_on_spot(tmp_path: Path) -> None:
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    urgent = request_retraining(
        Home(tmp_path / "a"), "degradation", "incremental", SETTINGS, NOW, CATALOG
    )
    assert urgent.action == "submitted" and urgent.tier == "P0"
    assert urgent.plan is not None and urgent.plan["market"] == "on-demand"
    nightly = request_retraining(
        Home(tmp_path / "b"), "scheduled", "incremental", SETTINGS, NOW, CATALOG
    )
    assert nightly.tier == "P2" and nightly.plan is not None and nightly.plan["market"] == "spot"
    record = JobStore.in_home(tmp_path / "a").get(urgent.handle or "", NOW)
    assert record.request["markets"] == ["on-demand"] and record.account == "autofe-retraining"
    assert record.request["deadline"] == NOW + 2 * 3600.0
    labels = record.request["labels"]
    assert labels["mode"] == "incremental" and labels["trigger"] == "degradation"
    assert labels["estimate"] == "prior (0 nights)"
    assert labels["command"].endswith("--mode incremental --handle HANDLE")


def test_one_open_request_whose_tier_a_more_urgent_firing_raises(home: Home) -> None:
    first = request_retraining(home, "scheduled", "incremental", SETTINGS, NOW, CATALOG)
    drift = request_retraining(home, "drift", "incremental", SETTINGS, NOW + 60, CATALOG)
    assert (drift.action, drift.handle, drift.tier) == ("retiered", first.handle, "P1")
    skew = request_retraining(home, "skew", "full", SETTINGS, NOW + 90, CATALOG)
    assert (skew.action, skew.tier, skew.mode) == ("retiered", "P1", "full")  # mode raised
    urgent = request_retraining(home, "degradation", "incremental", SETTINGS, NOW + 120, CATALOG)
    assert (urgent.action, urgent.tier, urgent.mode) == ("retiered", "P0", "full")
    assert urgent.plan is not None and urgent.plan["market"] == "on-demand"
    again = request_retraining(home, "drift", "incremental", SETTINGS, NOW + 180, CATALOG)
    assert again.action == "attached" and again.tier == "P0"
    store = JobStore.in_home(home.root)
    assert store.handles() == [first.handle]
    kinds = [e.kind for e in store.get(first.handle or "", NOW + 200).events]
    assert kinds == ["submitted", "retiered", "retiered", "retiered"]


def test_a_running_retraining_takes_firings_and_a_finished_one_frees_the_home(home: Home) -> None:
    first = request_retraining(home, "scheduled", "incremental", SETTINGS, NOW, CATALOG)
    store = JobStore.in_home(home.root)
    store.report(first.handle or "", "started", NOW + 10)
    during = request_retraining(home, "degradation", "incremental", SETTINGS, NOW + 20, CATALOG)
    assert (during.action, during.tier) == ("attached", "P2")  # too late to change its plan
    store.report(first.handle or "", "succeeded", NOW + 900)
    assert open_request(home, NOW + 901) is None
    after = request_retraining(home, "degradation", "incremental", SETTINGS, NOW + 950, CATALOG)
    assert after.action == "submitted" and after.handle != first.handle


def test_an_exhausted_budget_holds_p2_and_reports_it_but_p0_runs(home: Home) -> None:
    budget = TriggerSettings(budget_usd=1.0)
    spent = request_retraining(home, "degradation", "incremental", budget, NOW, CATALOG)
    store = JobStore.in_home(home.root)
    store.report(spent.handle or "", "started", NOW)
    store.report(spent.handle or "", "succeeded", NOW + 3 * 3600)  # 3 h on demand: > $1
    assert store.summary(NOW + 3 * 3600).budget_remaining["autofe-retraining"] < 0
    held = request_retraining(home, "scheduled", "incremental", budget, NOW + 4 * 3600, CATALOG)
    assert held.action == "held" and held.handle is None
    assert "budget 'autofe-retraining' has $0.00 left this period" in held.reason
    assert held_request(home) == {
        "kind": "scheduled",
        "tier": "P2",
        "mode": "incremental",
        "reason": held.reason,
        "since": NOW + 4 * 3600,
    }
    assert retry_held(home, budget, NOW + 5 * 3600, CATALOG).action == "held"  # type: ignore[union-attr]
    assert held_request(home)["since"] == NOW + 4 * 3600  # type: ignore[index]
    urgent = request_retraining(home, "degradation", "incremental", budget, NOW + 5 * 3600, CATALOG)
    assert urgent.action == "submitted" and urgent.tier == "P0" and "over budget" in urgent.reason
    assert held_request(home) is None  # the held request went forward as the P0
    state = json.loads(home.retraining.read_text())
    assert state["handle"] == urgent.handle


def test_a_held_request_goes_forward_in_the_next_period(home: Home) -> None:
    budget = TriggerSettings(budget_usd=0.001)
    held = request_retraining(home, "scheduled", "incremental", budget, NOW, CATALOG)
    assert held.action == "held"
    freed = retry_held(home, TriggerSettings(budget_usd=50.0), NOW + 86400, CATALOG)
    assert freed is not None and freed.action == "submitted" and freed.tier == "P2"
    assert open_request(home, NOW + 86400) is not None and held_request(home) is None
