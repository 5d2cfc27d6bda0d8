"""What ``autofe serve`` records for the retraining triggers: ``HOME/served.jsonl`` (the
features of every prediction served), the trigger check after each actual, and the trigger
families of ``/metrics`` (read from ``HOME/triggers.jsonl``).

Fixtures and home folders are those of ``test_serve.py``: the example warehouse and the
manual baseline promoted as ``v0001``.
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from test_serve import client, home, latest, spec

from autofe.errors import ConfigError
from autofe.modeling.registry import Registry
from autofe.pipelines import triggers
from autofe.pipelines.serve_routes import service_of
from autofe.pipelines.served_log import read_served_tail
from autofe.warehouse.connect import schema_fingerprint

__all__ = ["client", "home", "latest", "spec"]  # test_serve's fixtures, used here by name


def model_features(home: Path) -> list[str]:
    return list(Registry(home).load("v0001", schema_fingerprint()).model.features)


def test_each_prediction_appends_the_model_features_it_used(
    client: TestClient, home: Path, spec: dict[str, Any]
) -> None:
    computed = client.post("/v1/predict", json={**spec, "run_id": "next-1"})
    assert computed.status_code == 200, computed.text
    features = dict(computed.json()["features"])
    dropped = next(name for name, value in features.items() if value is not None)
    given = {**features, "not_a_feature": 1.0}
    del given[dropped]
    fast = client.post("/v1/predict", json={"job_id": spec["job_id"], "features": given})
    assert fast.status_code == 200, fast.text

    tail = read_served_tail(home / "served.jsonl", 10)
    assert (tail.lines, tail.skipped) == (2, 0)
    first, second = tail.records
    names = model_features(home)
    assert list(first.features) == names == list(second.features)
    assert first.features == features  # the values computed, as the response gave them
    assert (first.run_id, first.job_id, first.model_version) == ("next-1", spec["job_id"], "v0001")
    assert second.features == {**features, dropped: None}  # unknown name dropped, absent: null
    assert second.run_id is None
    assert first.at_s <= second.at_s


def test_a_batch_appends_one_line_per_prediction_made(
    client: TestClient, home: Path, spec: dict[str, Any]
) -> None:
    items = [{**spec, "run_id": "a"}, {**spec, "job_id": "no-such-job"}, {**spec, "run_id": "b"}]
    response = client.post("/v1/predict/batch", json={"items": items})
    assert [r["status"] for r in response.json()["results"]] == [200, 422, 200]
    records = read_served_tail(home / "served.jsonl", 10).records
    assert [r.run_id for r in records] == ["a", "b"]


def test_an_unwritable_served_log_never_fails_a_prediction(
    client: TestClient, home: Path, spec: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    (home / "served.jsonl").mkdir()
    given = {"job_id": spec["job_id"], "features": {}}
    with caplog.at_level(logging.WARNING, logger="autofe.pipelines.serve_service"):
        responses = [client.post("/v1/predict", json=given) for _ in range(3)]
        responses.append(client.post("/v1/predict", json=spec))
    assert [r.status_code for r in responses] == [200, 200, 200, 200]
    warnings = [r for r in caplog.records if "served.jsonl" in r.getMessage()]
    assert len(warnings) == 1  # once, not once per prediction


def test_each_actual_checks_the_triggers_and_their_errors_never_fail_it(
    client: TestClient, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[Path] = []
    outcomes: list[BaseException | None] = [None, ConfigError("bad thresholds"), OSError("disk")]

    def after_actuals(
        root: Path, now: float | None = None, cursor: Any = None
    ) -> list[dict[str, Any]]:
        calls.append(root)
        outcome = outcomes[len(calls) - 1]
        if outcome is not None:
            raise outcome
        return []

    _install_triggers(monkeypatch, after_actuals)
    actual = {"run_id": "r", "job_id": "109", "duration_s": 21.7}
    statuses = [client.post("/v1/actuals", json=actual).status_code for _ in outcomes]
    assert statuses == [201, 201, 201]
    assert calls == [home] * 3
    assert len((home / "actuals.jsonl").read_text().splitlines()) == 3


def test_a_trigger_check_already_running_is_not_started_twice(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    entered, release = threading.Event(), threading.Event()
    calls: list[Path] = []

    def after_actuals(
        root: Path, now: float | None = None, cursor: Any = None
    ) -> list[dict[str, Any]]:
        calls.append(root)
        entered.set()
        release.wait(30)
        return []

    _install_triggers(monkeypatch, after_actuals)
    service = service_of(client.app)  # type: ignore[arg-type]
    slow = threading.Thread(target=service.check_triggers)
    slow.start()
    assert entered.wait(30)
    actual = {"run_id": "r", "job_id": "109", "duration_s": 21.7}
    assert client.post("/v1/actuals", json=actual).status_code == 201  # skipped, not waiting
    release.set()
    slow.join()
    assert len(calls) == 1
    assert client.post("/v1/actuals", json=actual).status_code == 201
    assert len(calls) == 2


def test_metrics_count_trigger_firings_from_the_triggers_file(
    client: TestClient, home: Path
) -> None:
    firings = [
        _firing(1_800_000_000.0, "degradation", "P0", "submitted"),
        _firing(1_800_000_100.0, "skew", "P1", "held"),
        _firing(1_800_000_200.0, "degradation", "P0", "attached"),
        _firing(1_800_000_300.0, "degradation", "P0", "submitted"),
    ]
    lines = [json.dumps(f) for f in firings]
    (home / "triggers.jsonl").write_text("\n".join(lines) + '\n{"at_s": 1.0, "kind', "utf-8")
    text = client.get("/metrics").text
    samples = [line for line in text.splitlines() if "trigger" in line or "held" in line]
    assert [line for line in samples if not line.startswith("#")] == [
        'autofe_trigger_firings_total{kind="degradation",tier="P0",action="attached"} 1',
        'autofe_trigger_firings_total{kind="degradation",tier="P0",action="submitted"} 2',
        'autofe_trigger_firings_total{kind="skew",tier="P1",action="held"} 1',
        'autofe_trigger_last_fired_timestamp_seconds{kind="degradation"} 1800000300.0',
        'autofe_trigger_last_fired_timestamp_seconds{kind="skew"} 1800000100.0',
        "autofe_retraining_held_total 1",
    ]
    for family in ("autofe_trigger_firings_total", "autofe_retraining_held_total"):
        assert text.count(f"# TYPE {family} counter") == 1
    assert text.count("# TYPE autofe_trigger_last_fired_timestamp_seconds gauge") == 1


def test_metrics_before_any_firing_count_no_holds(client: TestClient) -> None:
    text = client.get("/metrics").text
    assert "autofe_retraining_held_total 0" in text.splitlines()
    assert "autofe_trigger_firings_total{" not in text


def _firing(at_s: float, kind: str, tier: str, action: str) -> dict[str, Any]:
    return {
        "at": "2027-01-15T08:00:00Z",
        "at_s": at_s,
        "kind": kind,
        "tier": tier,
        "source": "actuals",
        "model_version": "v0001",
        "evidence": {},
        "action": action,
        "handle": None,
        "mode": "incremental",
        "reason": "a test firing",
    }


def _install_triggers(monkeypatch: pytest.MonkeyPatch, after_actuals: Any) -> None:
    """Put ``after_actuals`` in the place of the check the service runs after each actual."""
    monkeypatch.setattr(triggers, "after_actuals", after_actuals)
