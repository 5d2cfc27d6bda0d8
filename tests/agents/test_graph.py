"""The real compiled graph with a scripted backend and an in-memory MCP client."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from mcp.client import Client

from autofe.agents.context import LoopContext
from autofe.agents.graph import build_graph
from autofe.agents.llm import Proposal, ProposalBatch, ProposalRequest, Usage
from autofe.agents.settings import EvalSettings, LoopSettings, Targets
from autofe.agents.state import final_features
from autofe.agents.toolbox import McpToolbox
from autofe.evals.manual import manual_features
from autofe.knowledge_base.embeddings import HashingEmbedder
from autofe.knowledge_base.retrieve import KnowledgeBase
from autofe.tools.server import ServerConfig, build_server

SPECS = manual_features()
ROUND = 6
UNREACHABLE = Targets(r2=2.0, mape=None)


class Crash(Exception):
    """The process dying mid-run (the checkpoint of the last finished node survives)."""


@dataclass
class Scripted:
    """A backend that proposes the manual features ROUND at a time, and can crash on a round."""

    name: str = "scripted"
    crash_on: int | None = None
    requests: list[ProposalRequest] = field(default_factory=list)

    def propose(self, request: ProposalRequest) -> ProposalBatch:
        self.requests.append(request)
        if request.iteration == self.crash_on:
            raise Crash(f"killed in round {request.iteration}")
        chunk = SPECS[request.iteration * ROUND : (request.iteration + 1) * ROUND]
        proposals = [
            Proposal(name=s.name, sql=s.sql, category=s.category, value_type=s.value_type)
            for s in chunk
        ]
        return ProposalBatch(proposals=proposals, usage=Usage(prompt_tokens=10), prompt_hash="x")


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> KnowledgeBase:
    return KnowledgeBase(index_dir=tmp_path_factory.mktemp("kb"), embedder=HashingEmbedder())


async def _run(
    db: Path,
    out: Path,
    kb: KnowledgeBase,
    backend: Scripted,
    settings: LoopSettings,
    resume: bool = False,
) -> tuple[list[str], dict[str, Any]]:
    store = out / "features.duckdb"
    nodes: list[str] = []
    async with Client(build_server(ServerConfig(db=db, store=store))) as client:
        ctx = LoopContext(db, store, out, McpToolbox(client), kb, backend, settings)
        async with AsyncSqliteSaver.from_conn_string(str(out / "cp.sqlite")) as saver:
            app = build_graph(ctx).compile(checkpointer=saver)
            config = {"configurable": {"thread_id": "t"}}
            try:
                async for update in app.astream(
                    None if resume else {"iteration": 0}, config, stream_mode="updates"
                ):
                    nodes += list(update)
            except Crash:
                pass
            state = (await app.aget_state(config)).values
    return nodes, state


def _settings(targets: Targets = UNREACHABLE, **kw: Any) -> LoopSettings:
    return LoopSettings(targets=targets, per_round=ROUND, evaluation=EvalSettings(folds=3), **kw)


def run(
    db: Path,
    out: Path,
    kb: KnowledgeBase,
    backend: Scripted,
    settings: LoopSettings,
    resume: bool = False,
) -> tuple[list[str], dict[str, Any]]:
    out.mkdir(exist_ok=True)
    return asyncio.run(_run(db, out, kb, backend, settings, resume))


def test_rounds_follow_the_graph_until_max_iterations(
    example_warehouse: Path, tmp_path: Path, kb: KnowledgeBase
) -> None:
    backend = Scripted()
    nodes, state = run(example_warehouse, tmp_path, kb, backend, _settings(max_iterations=2))
    assert nodes == ["analyze", "extract", "evaluate"] * 2 + ["finalize"]
    assert state["stop_reason"] == "max_iterations"
    assert [h["proposed"] for h in state["history"]] == [ROUND, ROUND]
    assert state["tokens"] == 20
    assert state["final"]["features"] == len(final_features(state)) > 0
    assert len(final_features(state)) + len(state.get("pruned", [])) == len(state["kept"])
    assert (tmp_path / "model.joblib").is_file() and (tmp_path / "features").is_dir()
    # the second request carries the feedback and everything already proposed
    second = backend.requests[1]
    assert len(second.feedback["proposed_ids"]) == ROUND and "worst_jobs" in second.feedback
    assert second.knowledge and second.profile["tables"]["runs"]["rows"] > 0


@pytest.mark.parametrize(
    ("settings", "reason", "rounds"),
    [
        (_settings(Targets(r2=-100.0, mape=100.0)), "targets_met", 1),
        (_settings(budget_seconds=0.0), "budget_seconds", 1),
        (_settings(budget_tokens=5), "budget_tokens", 1),
        # eight rounds, ~50 s on two cores: make test-scale (CI) runs it
        pytest.param(_settings(max_iterations=20), "no_candidates", 8, marks=pytest.mark.slow),
    ],
    ids=["targets", "seconds", "tokens", "no-candidates"],
)
def test_stop_reasons(
    example_warehouse: Path,
    tmp_path: Path,
    kb: KnowledgeBase,
    settings: LoopSettings,
    reason: str,
    rounds: int,
) -> None:
    nodes, state = run(example_warehouse, tmp_path, kb, Scripted(), settings)
    assert state["stop_reason"] == reason
    assert nodes.count("evaluate") == rounds and nodes[-1] == "finalize"


@pytest.mark.slow  # three rounds twice, ~40 s on two cores: make test-scale (CI) runs it
def test_a_killed_run_resumes_to_the_same_result(
    example_warehouse: Path, tmp_path: Path, kb: KnowledgeBase
) -> None:
    settings = _settings(max_iterations=3)
    _, whole = run(example_warehouse, tmp_path / "whole", kb, Scripted(), settings)
    killed = tmp_path / "killed"
    nodes, partial = run(example_warehouse, killed, kb, Scripted(crash_on=1), settings)
    assert nodes == ["analyze", "extract", "evaluate"] and partial.get("stop_reason") is None
    nodes, resumed = run(example_warehouse, killed, kb, Scripted(), settings, resume=True)
    assert nodes[0] == "analyze" and nodes[-1] == "finalize"
    assert [k["name"] for k in resumed["kept"]] == [k["name"] for k in whole["kept"]]
    assert resumed["final"]["holdout"] == whole["final"]["holdout"]


def test_no_tool_is_imported_by_the_agents() -> None:
    import ast

    for path in (Path(__file__).parents[2] / "autofe" / "agents").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("autofe.tools"), path
