"""``autofe serve``: one clear line when it cannot start, and a real uvicorn server when it can."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from autofe.cli import app
from autofe.console import EXIT_USER_ERROR
from autofe.modeling.artifact import MODEL_FILE
from autofe.modeling.registry import Registry

runner = CliRunner()


def _home(root: Path, warehouse: Path, model: Path | None) -> Path:
    root.mkdir()
    shutil.copy(warehouse, root / "warehouse.duckdb")
    if model is not None:
        registry = Registry(root)
        registry.promote(registry.add(model, {"mape": 0.3}).name, "first model")
    return root


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("missing", "home folder .* does not exist"),
        ("empty", "no model is active in .*models: promote one first"),
        ("tampered", "cannot load the active model: .*SHA-256 differs"),
    ],
)
def test_serve_that_cannot_start_says_why_in_one_line(
    tmp_path: Path, example_warehouse: Path, manual_model: Path, setup: str, message: str
) -> None:
    home = tmp_path / "home"
    if setup != "missing":
        _home(home, example_warehouse, manual_model if setup == "tampered" else None)
    if setup == "tampered":
        (home / "models" / "v0001" / MODEL_FILE).write_bytes(b"not the model")
    result = runner.invoke(app, ["serve", "--home", str(home), "--port", "8999"])
    assert result.exit_code == EXIT_USER_ERROR
    assert "Traceback" not in result.output
    lines = result.output.strip().splitlines()
    assert lines[0].startswith("error:")
    assert re.search(message, " ".join(result.output.split())), result.output


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_serve_runs_uvicorn_on_loopback_with_the_token_from_the_environment(
    tmp_path: Path, example_warehouse: Path, manual_model: Path
) -> None:
    home = _home(tmp_path / "home", example_warehouse, manual_model)
    port = _free_port()
    env = {**os.environ, "AUTOFE_API_TOKEN": "t0ken", "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-m", "autofe", "serve", "--home", str(home), "--port", str(port)]
    server = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        health = _wait_for_health(base, server)
        assert health.json()["model_version"] == "v0001"
        with httpx.Client(base_url=base) as client:
            assert client.get("/v1/models").status_code == 401
            auth = {"Authorization": "Bearer t0ken"}
            models = client.get("/v1/models", headers=auth)
            assert models.status_code == 200 and models.json()["active"] == "v0001"
            body = {"job_id": "109", "features": {"cfg_local_cores": 2}}
            prediction = client.post("/v1/predict", json=body, headers=auth)
            assert prediction.status_code == 200 and prediction.json()["p50_s"] > 0
            _refusals_keep_the_connection(client, auth, body, _local_address(prediction))
    finally:
        server.send_signal(signal.SIGINT)
        output, _ = server.communicate(timeout=30)
    assert server.returncode == 0, output.decode()
    assert f"Uvicorn running on http://127.0.0.1:{port}" in output.decode()


def _refusals_keep_the_connection(
    client: httpx.Client, auth: dict[str, str], valid: Mapping[str, object], address: object
) -> None:
    """A lone surrogate (issue #27: a 500 that dropped the keep-alive connection) is refused
    with a 422, and the next request goes over the same connection."""
    headers = {**auth, "Content-Type": "application/json"}
    for hostile in (b'{"job_id": "109", "features": {"\\ud83d": 1}}', b'{"job_id": NaN}'):
        refused = client.post("/v1/predict", content=hostile, headers=headers)
        assert refused.status_code == 422, refused.text
        assert refused.headers.get("connection") != "close"
        assert _local_address(refused) == address
    again = client.post("/v1/predict", json=valid, headers=auth)
    assert again.status_code == 200 and _local_address(again) == address


def _local_address(response: httpx.Response) -> object:
    """The client side of the TCP connection the response came over."""
    return response.extensions["network_stream"].get_extra_info("client_addr")


def _wait_for_health(base: str, server: subprocess.Popen[bytes]) -> httpx.Response:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert server.poll() is None, "the server exited"
        try:
            return httpx.get(f"{base}/healthz", timeout=1).raise_for_status()
        except httpx.HTTPError:
            time.sleep(0.1)
    raise AssertionError("the server did not answer /healthz within 60 s")
