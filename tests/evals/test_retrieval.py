"""Retrieval evaluation on the labelled queries, with the shipped configuration."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autofe.cli import app
from autofe.errors import KnowledgeBaseError
from autofe.evals.retrieval.evaluate import QUERIES, evaluate, load_queries
from autofe.knowledge_base.embeddings import HashingEmbedder, MiniLMEmbedder
from autofe.knowledge_base.retrieve import KnowledgeBase


@pytest.fixture(scope="module")
def shipped_kb(minilm_index: Path) -> KnowledgeBase:
    return KnowledgeBase(index_dir=minilm_index, embedder=MiniLMEmbedder())


def test_at_least_fifty_labelled_queries_point_at_real_documents(
    shipped_kb: KnowledgeBase,
) -> None:
    queries = load_queries(QUERIES, set(shipped_kb.by_id))
    assert len(queries) >= 50
    assert len({q.id for q in queries}) == len(queries)


def test_hybrid_meets_the_recall_target(shipped_kb: KnowledgeBase) -> None:
    queries = load_queries(QUERIES, set(shipped_kb.by_id))
    (hybrid,) = evaluate(shipped_kb, queries, k=5, modes=("hybrid",))
    assert hybrid.recall_at_k >= 0.9, hybrid.misses
    assert hybrid.mrr > 0.6


def test_metrics_are_computed_as_defined(tmp_path: Path) -> None:
    kb = KnowledgeBase(index_dir=tmp_path / "i", embedder=HashingEmbedder())
    path = tmp_path / "q.jsonl"
    first = kb.search("spark.sql.autoBroadcastJoinThreshold", 83, "bm25")
    rank = next(h.rank for h in first if h.doc_id == "broadcast-threshold")
    path.write_text(
        json.dumps(
            {
                "id": "a",
                "query": "spark.sql.autoBroadcastJoinThreshold",
                "relevant": ["broadcast-threshold"],
            }
        )
        + "\n"
    )
    (score,) = evaluate(kb, load_queries(path, set(kb.by_id)), k=5, modes=("bm25",))
    assert score.mrr == pytest.approx(1.0 / rank)
    assert score.recall_at_k == (1.0 if rank <= 5 else 0.0)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "q.jsonl:1: not a query object"),
        ('{"id": "a", "query": "x", "relevant": ["no-such-doc"]}', "unknown or empty"),
        ('{"id": "a", "query": "x"}', "not a query object"),
    ],
)
def test_bad_query_files_name_the_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(KnowledgeBaseError, match=message):
        load_queries(path, {"data-skew"})


def test_cli_eval_retrieval_reports_all_modes(
    minilm_index: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AUTOFE_KB_DIR", str(minilm_index))
    result = CliRunner().invoke(app, ["eval", "retrieval", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [m["mode"] for m in report["modes"]] == ["dense", "bm25", "hybrid"]
    assert report["queries"] >= 50
    recall = {m["mode"]: m["recall_at_k"] for m in report["modes"]}
    assert recall["hybrid"] > max(recall["dense"], recall["bm25"])  # fusion measurably helps
