"""The real-model check (``make test-llm``): one round of ``autofe run --llm openai`` against
Gemma 3 270M behind llama-cpp-python's OpenAI-compatible server, on the shipped example.

Why a real model beside the scripted endpoint of ``tests/test_cli_llm.py``: a small local
model is what meets the backend's ladder, prompt fitting, pacing and per-item validation for
real (a server that refuses ``json_schema``, answers that are half JSON, a few tokens per
second). The check asserts what must hold whatever the model writes: the command finishes,
``metrics.json`` states why it stopped, and nothing is dropped without a reason. The numbers
of the round (speed, format, proposals, drops, phases) go to ``measured.json`` in the test's
tmp dir and to stdout.

Needs ``AUTOFE_LLM_PYTHON``, the python of the server's venv (``requirements-llm.txt``); the
test is skipped without it, and is marked ``slow`` so the default suite never collects it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver

from autofe.agents.llm import OUTPUT_FORMATS
from autofe.agents.state import STOP_WORDS
from autofe.console import EXIT_PARTIAL
from autofe.pipelines.run import THREAD

# the server helper is a script (its own CLI), not part of the autofe package
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from llm_server import MODEL_ALIAS, LlmServer, serving

PYTHON_VAR = "AUTOFE_LLM_PYTHON"
ROUND_TIMEOUT_S = 3600.0
"""One round takes minutes on 2 idle cores; a malformed answer is asked again up to
``max_retries`` times at up to 1264 answer tokens each, a few tokens/s on busy cores."""
ROUND_ARGS = ("--max-iterations", "1", "--per-round", "6", "--json")

pytestmark = [
    pytest.mark.llm,
    pytest.mark.slow,
    pytest.mark.skipif(
        not os.environ.get(PYTHON_VAR), reason=f"{PYTHON_VAR} unset: run `make test-llm`"
    ),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlmServer]:
    # absolute(), not resolve(): the venv's python is a symlink to the base interpreter
    python = Path(os.environ[PYTHON_VAR]).absolute()
    with serving(python, tmp_path_factory.mktemp("llm") / "server.log") as running:
        yield running


def post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=300) as response:
        answer: dict[str, Any] = json.load(response)
        return answer


def prompt_tokens(server: LlmServer, messages: list[dict[str, str]]) -> int:
    """The prompt tokens the server counts for a one-token answer to ``messages``."""
    body = {"model": MODEL_ALIAS, "messages": messages, "max_tokens": 1, "temperature": 0}
    return int(post(f"{server.url}/chat/completions", body)["usage"]["prompt_tokens"])


def test_the_server_prompts_gemma_with_the_system_message(server: LlmServer) -> None:
    """The prompt is the template's, token for token: one BOS, the system text in the user
    turn (the built-in ``gemma`` format would count the same tokens with and without it)."""
    system = {"role": "system", "content": "Answer with one JSON object and nothing else."}
    user = {"role": "user", "content": "Propose a feature."}
    expected = (
        f"<start_of_turn>user\n{system['content']}\n\n{user['content']}<end_of_turn>\n"
        "<start_of_turn>model\n"
    )  # without <bos>: /extras/tokenize adds the one BOS itself
    root = server.url.removesuffix("/v1")
    count = post(f"{root}/extras/tokenize/count", {"input": expected})["count"]
    assert prompt_tokens(server, [system, user]) == count
    assert prompt_tokens(server, [user]) < count


def run_round(server: LlmServer, out: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    """``autofe run --llm openai`` for one round against the server, as a user runs it."""
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env |= {"OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "local", "HF_HUB_OFFLINE": "1"}
    autofe = Path(sys.executable).parent / "autofe"
    command = [str(autofe), "run", "--out", str(out), "--llm", "openai", "--model", MODEL_ALIAS]
    started = time.monotonic()
    try:
        done = subprocess.run(
            [*command, *ROUND_ARGS],
            env=env,
            cwd=out.parent,
            capture_output=True,
            text=True,
            timeout=ROUND_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        log = (out / "run.log").read_text() if (out / "run.log").is_file() else ""
        pytest.fail(f"no end after {ROUND_TIMEOUT_S:.0f} s; run.log:\n{log[-3000:]}")
    return done, time.monotonic() - started


def final_drops(out: Path) -> list[dict[str, Any]]:
    """Every candidate the loop dropped (gates and evaluator), from the run's last checkpoint:
    ``metrics.json`` only counts them by stage."""
    with SqliteSaver.from_conn_string(str(out / "checkpoints.sqlite")) as saver:
        checkpoint = saver.get({"configurable": {"thread_id": THREAD}})
    assert checkpoint is not None
    drops: list[dict[str, Any]] = checkpoint["channel_values"].get("dropped", [])
    return drops


def measured(metrics: dict[str, Any], drops: list[dict[str, Any]], wall_s: float) -> dict[str, Any]:
    """The round's numbers, for the release notes and docs/results.md."""
    llm = metrics["llm"]
    asked = [r for r in llm["rounds"] if r["requests"]]
    rounds = metrics["iterations"]
    return {
        "wall_s": round(wall_s, 1),
        "stop_reason": metrics["stop_reason"],
        "output_format": llm["output_format"],
        "requests": llm["requests"],
        "tokens_per_s": [r["tokens_per_s"] for r in asked],
        "prompt_tokens": sum(r["prompt_tokens"] for r in asked),
        "completion_tokens": sum(r["completion_tokens"] for r in asked),
        "prompt": [r["prompt"] for r in asked],
        "llm_seconds": sum(r["seconds"] for r in asked),
        "proposals": sum(r["proposals"] for r in asked),
        "malformed": llm["malformed"],
        "dropped_by_reason": llm["dropped_by_reason"],
        "dropped": [d for r in asked for d in r["dropped"]],
        "refused": [r["refused"] for r in asked if r["refused"]],
        "warnings": [w for r in asked for w in r["warnings"]],
        "proposed": metrics["proposed"],
        "gated": sum(r["gated"] for r in rounds),
        "kept": sum(r["kept"] for r in rounds),
        "rejected_by_stage": metrics["rejected_by_stage"],
        "rejections": [{k: d[k] for k in ("name", "stage", "reason")} for d in drops],
        "seconds_per_phase": [r["seconds"] for r in rounds],
        "holdout": metrics["holdout"],
    }


def test_one_real_round(server: LlmServer, tmp_path: Path) -> None:
    out = tmp_path / "run"
    done, wall_s = run_round(server, out)
    detail = f"exit {done.returncode}\n{done.stderr[-3000:]}"
    assert "Traceback" not in done.stderr, detail
    assert done.returncode in (0, EXIT_PARTIAL), detail
    metrics = json.loads((out / "metrics.json").read_text())
    assert json.loads(done.stdout) == metrics
    assert metrics["stop_reason"] in STOP_WORDS, metrics["stop_reason"]
    assert (metrics["model"] is None) == (done.returncode == EXIT_PARTIAL)

    asked = [r for r in metrics["llm"]["rounds"] if r["requests"]]
    assert asked, "the backend sent no request"
    assert all(r["output_format"] in OUTPUT_FORMATS for r in asked), asked
    for item in [d for r in asked for d in r["dropped"]]:
        assert item["reason"].strip(), item
    drops = final_drops(out)
    for drop in drops:
        assert drop["reason"].strip() and drop["stage"], drop
    assert sum(metrics["rejected_by_stage"].values()) == len(drops)
    assert metrics["proposed"] - metrics["accepted"] == len(drops)

    numbers = measured(metrics, drops, wall_s)
    (tmp_path / "measured.json").write_text(json.dumps(numbers, indent=2) + "\n")
    print(f"\nreal round ({tmp_path / 'measured.json'}):\n{json.dumps(numbers, indent=2)}")
