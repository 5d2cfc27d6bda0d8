"""``autofe run --llm openai`` end to end on the example, against a scripted local endpoint.

Every LLM failure a user can meet — an empty or useless answer, a refused structured-output
format, an endpoint that is down, dies mid-answer or stalls — ends with a stated reason or one
``error:`` line and exit 2 (never a traceback), and ``--resume`` continues once it is back.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from llm_endpoint import Reply, completion, free_port, item, proposals, serving
from typer.testing import CliRunner, Result

from autofe.cli import app
from autofe.console import EXIT_PARTIAL, EXIT_USER_ERROR

runner = CliRunner()

HOUR = item("submit_hour", sql="SELECT run_id, hour(submit_time) AS value FROM runs")
WEEKDAY = item("submit_weekday", sql="SELECT run_id, dayofweek(submit_time) AS value FROM runs")
MINUTE = item("submit_minute", sql="SELECT run_id, minute(submit_time) AS value FROM runs")
MONTH = item("submit_month", sql="SELECT run_id, month(submit_time) AS value FROM runs")
for good in (HOUR, WEEKDAY, MINUTE, MONTH):
    good["category"] = "calendar"
REFUSED = item("model_id", sql="model_id")
LLAMA_CPP_REFUSAL = (
    "1 validation error: {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
    "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}"
)


@pytest.fixture(autouse=True)
def _loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local")


def llm_run(
    monkeypatch: pytest.MonkeyPatch, url: str, out: Path, *extra: str
) -> tuple[Result, dict[str, Any] | None]:
    """One ``autofe run --llm openai`` on the example; its result and metrics.json."""
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    args = ["run", "--out", str(out), "--llm", "openai", "--model", "test-model"]
    args += ["--per-round", "3", "--llm-batch", "3", "--budget-seconds", "100000", *extra]
    result = runner.invoke(app, args)
    metrics = out / "metrics.json"
    return result, json.loads(metrics.read_text()) if metrics.is_file() else None


def one_error_line(result: Result) -> str:
    """The single ``error:`` line of a failed command (and no traceback)."""
    assert "Traceback" not in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_an_empty_answer_stops_with_no_candidates_and_no_model(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with serving() as server:
        server.script(Reply(completion(proposals())))
        result, metrics = llm_run(monkeypatch, server.url, tmp_path / "run", "--json")
    assert result.exit_code == EXIT_PARTIAL, result.output
    assert metrics is not None and json.loads(result.stdout) == metrics
    assert metrics["stop_reason"] == "no_candidates"
    assert metrics["model"] is None and metrics["holdout"] is None
    assert "no model: no candidates" in result.stderr
    report = (tmp_path / "run" / "report.html").read_text()
    assert "no_candidates (no candidates" in report and "No model was written" in report


def test_proposals_the_gates_refuse_twice_stop_with_every_reason(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The model's one proposal each round is refused (as Gemma's ``"sql": "model_id"`` was)."""
    bad_then_refused = proposals(REFUSED, item("Bad Name!"))
    with serving() as server:
        server.script(*(Reply(completion(bad_then_refused)) for _ in range(2)))
        args = ("--per-round", "1", "--llm-batch", "1")  # one request per round
        result, metrics = llm_run(monkeypatch, server.url, tmp_path / "run", *args)
        second_prompt = server.received[-1]["messages"][1]["content"]
    assert result.exit_code == EXIT_PARTIAL, result.output
    assert metrics is not None and metrics["stop_reason"] == "no_candidates"
    assert [h["gated"] for h in metrics["iterations"]] == [0, 0]
    assert [h["malformed"] for h in metrics["iterations"]] == [1, 1]
    assert metrics["rejected_by_stage"]["gate:completeness"] == 2
    assert metrics["llm"]["dropped_by_reason"] == {"name": 2}
    for r in metrics["llm"]["rounds"]:
        assert all(d["reason"] for d in r["dropped"])
    assert "answer_items_dropped" in second_prompt  # the reasons went back to the model


def test_down_refused_format_and_dead_mid_answer_are_one_line_and_resume_continues(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    out, port = tmp_path / "run", free_port()
    url = f"http://127.0.0.1:{port}/v1"
    down, _ = llm_run(monkeypatch, url, out, "--max-iterations", "2", "--json")
    assert down.exit_code == EXIT_USER_ERROR
    line = one_error_line(down)
    assert f"LLM endpoint {url}: connection failed" in line and "after 3 retries" in line
    assert f"autofe run --resume {out}" in line and "--llm offline" in line
    assert json.loads(down.stdout)["kind"] == "LLMError"
    assert "stopped: LLM endpoint" in (out / "run.log").read_text()
    with serving(port) as server:
        dead = Reply(completion(proposals(MONTH)), drop=True)
        server.script(
            Reply({"error": {"message": LLAMA_CPP_REFUSAL}}, status=500),
            Reply(completion(proposals(HOUR, WEEKDAY, MINUTE))),
            *(dead for _ in range(4)),
        )
        died = runner.invoke(app, ["run", "--resume", str(out)])
        assert died.exit_code == EXIT_USER_ERROR, died.output
        assert "connection lost mid-answer" in one_error_line(died)
        server.script(Reply(completion(proposals(MONTH))))
        resumed = runner.invoke(app, ["run", "--resume", str(out), "--json"])
    assert resumed.exit_code == 0, resumed.output
    metrics = json.loads(resumed.stdout)
    assert metrics["stop_reason"] == "max_iterations" and metrics["model"]
    assert metrics["accepted"] >= 1 and len(metrics["iterations"]) == 2
    assert metrics["llm"]["output_format"] == "json_object"
    log = (out / "run.log").read_text()
    assert "structured output json_schema: the endpoint refused it" in log
    assert "LLM request failed (attempt 1): connection lost mid-answer" in log


def test_a_stalled_endpoint_is_one_line_naming_the_timeout(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with serving() as server:
        stalled = Reply(completion(proposals(HOUR)), stall_s=10.0, ping_s=0.1)
        server.script(*(stalled for _ in range(4)))
        result, _ = llm_run(monkeypatch, server.url, tmp_path / "run", "--llm-timeout", "0.5")
    assert result.exit_code == EXIT_USER_ERROR
    assert "timed out after 0.5 s without output" in one_error_line(result)


def test_bad_llm_options_are_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for option, value, said in (
        ("--llm-format", "xml", "--llm-format 'xml' is not a format"),
        ("--llm-context", "10", "--llm-context 10 is too small"),
        ("--llm-timeout", "0", "--llm-timeout must be more than 0"),
    ):
        result, _ = llm_run(monkeypatch, "http://127.0.0.1:9/v1", tmp_path / option, option, value)
        assert result.exit_code == EXIT_USER_ERROR
        assert said in one_error_line(result)


def test_a_format_the_endpoint_refuses_when_fixed_is_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``--llm-format json_schema`` takes the ladder away: the refusal is the error."""
    with serving() as server:
        server.script(Reply({"error": {"message": LLAMA_CPP_REFUSAL}}, status=500))
        result, _ = llm_run(
            monkeypatch, server.url, tmp_path / "run", "--llm-format", "json_schema"
        )
    assert result.exit_code == EXIT_USER_ERROR
    line = one_error_line(result)
    assert "HTTP 500" in line and "response_format" in line and "--resume" in line
