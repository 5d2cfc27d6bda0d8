"""``autofe serve`` with a planted model: a code-running pickle, its manifest's SHA-256
recomputed, in the active version's folder or in a new version the pointer is moved to by
hand (the registry's promote refuses it). Nothing runs; the server says why and keeps any
model it was serving."""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

from fastapi.testclient import TestClient
from planted_models import copy_model, plant, touch
from typer.testing import CliRunner

from autofe.cli import app
from autofe.console import EXIT_USER_ERROR
from autofe.modeling.registry import ACTIVE_FILE, Registry
from autofe.pipelines.serve import create_app

REFUSAL = "references posix.system, which an autofe model never contains"


def _home(root: Path, warehouse: Path, model: Path) -> Registry:
    root.mkdir()
    shutil.copy(warehouse, root / "warehouse.duckdb")
    registry = Registry(root)
    registry.promote(registry.add(model, {"mape": 0.3}).name, "first model")
    return registry


def test_serve_does_not_start_on_a_planted_active_model(
    tmp_path: Path, example_warehouse: Path, manual_model: Path
) -> None:
    registry = _home(tmp_path / "home", example_warehouse, manual_model)
    sentinel = tmp_path / "SENTINEL"
    plant(registry.root / "v0001", pickle.dumps(touch(sentinel)))
    result = CliRunner().invoke(app, ["serve", "--home", str(registry.home), "--port", "8999"])
    assert not sentinel.exists()
    assert result.exit_code == EXIT_USER_ERROR and "Traceback" not in result.output
    message = " ".join(result.output.split())
    assert message.startswith("error: cannot load the active model: ") and REFUSAL in message


def test_the_app_loads_no_planted_model_and_keeps_serving_the_old_one(
    tmp_path: Path, example_warehouse: Path, manual_model: Path
) -> None:
    registry = _home(tmp_path / "home", example_warehouse, manual_model)
    client = TestClient(create_app(registry.home, token="", poll_s=0))
    assert client.get("/healthz").json()["model_version"] == "v0001"
    sentinel = tmp_path / "SENTINEL"
    planted = copy_model(manual_model, registry.root / "v0002")
    plant(planted, pickle.dumps(touch(sentinel)))
    pointer = {"version": "v0002", "since": "2024-01-01T00:00:00+00:00", "reason": "by hand"}
    (registry.root / ACTIVE_FILE).write_text(json.dumps(pointer))
    health = client.get("/healthz").json()
    assert not sentinel.exists()
    assert health["model_version"] == "v0001" and health["active_version"] == "v0002"
    assert health["status"] == "stale" and REFUSAL in health["reload_error"]


def test_the_app_starts_without_a_model_when_the_active_one_is_planted(
    tmp_path: Path, example_warehouse: Path, manual_model: Path
) -> None:
    registry = _home(tmp_path / "home", example_warehouse, manual_model)
    sentinel = tmp_path / "SENTINEL"
    plant(registry.root / "v0001", pickle.dumps(touch(sentinel)))
    health = TestClient(create_app(registry.home, token="", poll_s=0)).get("/healthz")
    assert not sentinel.exists()
    assert health.status_code == 503 and health.json()["model_version"] is None
    assert REFUSAL in health.json()["reload_error"]
