"""Prediction API latency: the fast path in-process, over HTTP under load, and computed features.

Run: ``.venv/bin/python benchmarks/api.py [--calls 10000] [--clients 8] [--requests 4000]
[--seconds 60] [--computed 30] [--write docs/results.md]``

Setup (not timed): the shipped example workspace ingested into ``HOME/warehouse.duckdb``, the
manual baseline trained, registered and promoted (a home as ``autofe nightly`` leaves it), and
the feature values of the latest run computed once. Timed:

- in-process: ``predict_given``, what ``POST /v1/predict`` runs for a body with features (the
  model's ``predict_values`` and the response model), on the loaded model, ``--calls`` times
  after 200 warm-up calls;
- HTTP: ``autofe serve`` started as a subprocess on a free 127.0.0.1 port (uvicorn as shipped,
  access log on, written to a file); clients are threads, each with its own keep-alive
  ``httpx.Client``, posting the same features-given body until ``--requests`` are answered or
  ``--seconds`` pass; latency is measured by the client (send to full response). One client
  first (no queueing), then ``--clients`` at once. The clients share the machine's cores with
  the server;
- computed: ``--computed`` job specs (the latest runs' job, configuration and submit time) posted
  one at a time: features computed against the warehouse, as for a job not yet submitted.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import httpx
from report import machine, percentile, run_and_write

from autofe.config import IngestSettings, example_workspace
from autofe.evals.manual import manual_features
from autofe.ingest.ingest import ingest
from autofe.modeling.predict import predict_run
from autofe.modeling.registry import Registry
from autofe.pipelines.serve_models import PredictRequest
from autofe.pipelines.serve_service import Service, predict_given
from autofe.pipelines.train import train_model

WARM_UP = 200


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10_000, help="in-process calls")
    parser.add_argument("--clients", type=int, default=8, help="concurrent HTTP clients")
    parser.add_argument("--requests", type=int, default=4000, help="HTTP requests per load run")
    parser.add_argument("--seconds", type=float, default=60.0, help="time cap per load run")
    parser.add_argument("--computed", type=int, default=30, help="computed-features requests")
    parser.add_argument("--write", type=Path)
    run_and_write("api", parser.parse_args(), run)


def run(tmp: Path, args: argparse.Namespace) -> str:
    home = _home(tmp)
    service = Service(home)
    loaded = service.live.current()
    assert loaded is not None
    specs = _latest_specs(home / "warehouse.duckdb", args.computed)
    latest = str(specs[0].pop("source_run"))
    features = predict_run(loaded.artifact, home / "warehouse.duckdb", latest).features
    request = PredictRequest(job_id=str(specs[0]["job_id"]), features=features)
    given = {"job_id": request.job_id, "features": features}
    in_process = _repeat(lambda: predict_given(loaded, request), args.calls)
    with _server(home, tmp / "server.log") as base:
        one = _load(base, given, 1, args.requests // 4, args.seconds)
        many = _load(base, given, args.clients, args.requests, args.seconds)
        computed = _computed(base, specs)
    return _report(args, len(features), in_process, one, many, computed)


def _home(tmp: Path) -> Path:
    home = tmp / "home"
    home.mkdir()
    ingest([example_workspace()], IngestSettings(db=home / "warehouse.duckdb", workers=1))
    train_model(home / "warehouse.duckdb", manual_features(), tmp / "model")
    registry = Registry(home)
    registry.promote(registry.add(tmp / "model", {}).name, "benchmark")
    return home


def _latest_specs(db: Path, n: int) -> list[dict[str, Any]]:
    """The latest runs as job specs (the first keeps its run id, to compute its features)."""
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute(
            "SELECT run_id, job_id, submit_time, cluster_config_id FROM runs "
            "ORDER BY submit_time DESC, run_id LIMIT ?",
            [n],
        ).fetchall()
    specs = [
        {"job_id": job, "submit_time": submit.isoformat(), "cluster_config_id": config}
        for _, job, submit, config in rows
    ]
    specs[0]["source_run"] = rows[0][0]
    return specs


def _repeat(call: Callable[[], object], n: int) -> list[float]:
    for _ in range(WARM_UP):
        call()
    times = []
    for _ in range(n):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return times


class _server:
    """``autofe serve`` as a subprocess on a free loopback port, up until the block ends."""

    def __init__(self, home: Path, log: Path) -> None:
        self.port = _free_port()
        self.log = log.open("wb")
        command = [sys.executable, "-m", "autofe", "serve", "--home", str(home)]
        env = {k: v for k, v in os.environ.items() if k != "AUTOFE_API_TOKEN"}
        self.process = subprocess.Popen(
            [*command, "--port", str(self.port)], stdout=self.log, stderr=subprocess.STDOUT, env=env
        )

    def __enter__(self) -> str:
        base = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"autofe serve exited; see {self.log.name}")
            try:
                httpx.get(f"{base}/healthz", timeout=1).raise_for_status()
                return base
            except httpx.HTTPError:
                time.sleep(0.1)
        raise SystemExit("autofe serve did not answer /healthz within 60 s")

    def __exit__(self, *exc: object) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)
        self.log.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Load:
    """Client-side latencies (ms) of one load run, its wall time and its failures."""

    def __init__(self, clients: int) -> None:
        self.clients = clients
        self.times: list[float] = []
        self.failures = 0
        self.seconds = 0.0
        self._lock = threading.Lock()

    def add(self, ms: float, ok: bool) -> None:
        with self._lock:
            self.times.append(ms)
            self.failures += not ok


def _load(base: str, body: dict[str, Any], clients: int, total: int, cap: float) -> Load:
    load = Load(clients)
    content = json.dumps(body).encode()
    headers = {"content-type": "application/json"}
    budget = iter(range(total))
    budget_lock = threading.Lock()
    stop_at = time.monotonic() + cap

    def client() -> None:
        with httpx.Client(base_url=base, headers=headers, timeout=30) as http:
            for _ in range(20):  # warm-up: connection, server threads
                http.post("/v1/predict", content=content)
            while time.monotonic() < stop_at:
                with budget_lock:
                    if next(budget, None) is None:
                        return
                started = time.perf_counter()
                response = http.post("/v1/predict", content=content)
                load.add((time.perf_counter() - started) * 1000, response.status_code == 200)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    load.seconds = time.perf_counter() - started
    return load


def _computed(base: str, specs: list[dict[str, Any]]) -> Load:
    load = Load(1)
    with httpx.Client(base_url=base, timeout=60) as http:
        http.post("/v1/predict", json=specs[-1])  # warm-up
        for spec in specs:
            started = time.perf_counter()
            response = http.post("/v1/predict", json=spec)
            load.add((time.perf_counter() - started) * 1000, response.status_code == 200)
    return load


def _row(name: str, times: list[float], extra: str = "") -> str:
    p50, p99 = percentile(times, 0.5), percentile(times, 0.99)
    return f"| {name} | {len(times):,} | {p50:.2f} | {p99:.2f} | {max(times):.2f} | {extra} |"


def _throughput(load: Load) -> str:
    return f"{len(load.times) / load.seconds:,.0f} req/s, {load.failures} failed"


def _report(
    args: argparse.Namespace,
    n_features: int,
    in_process: list[float],
    one: Load,
    many: Load,
    computed: Load,
) -> str:
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    command = (
        f".venv/bin/python benchmarks/api.py --calls {args.calls} --clients {args.clients} "
        f"--requests {args.requests} --seconds {args.seconds:g} --computed {args.computed}"
    )
    target = "met" if percentile(in_process, 0.99) <= 1.0 else "missed"
    return (
        "\n".join(
            [
                f"Commit {commit}. Machine: {machine()}. Command: `{command}`.",
                "",
                f"Model: manual baseline, {n_features} features. In-process p99 target "
                f"(≤ 1 ms): {target}.",
                "",
                "| path | calls | p50 ms | p99 ms | max ms | throughput, failures |",
                "|---|---|---|---|---|---|",
                _row("in-process, features given (`predict_given`)", in_process),
                _row("HTTP, features given, 1 client", one.times, _throughput(one)),
                _row(
                    f"HTTP, features given, {many.clients} concurrent clients",
                    many.times,
                    _throughput(many),
                ),
                _row(
                    "HTTP, features computed from a job spec, 1 client",
                    computed.times,
                    f"{computed.failures} failed",  # sequential: throughput is 1 / latency
                ),
            ]
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
