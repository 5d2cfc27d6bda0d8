"""``autofe eval``: measured evaluations (retrieval quality of the knowledge base)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer

from autofe.console import out, user_errors
from autofe.evals.retrieval.evaluate import QUERIES, evaluate, load_queries
from autofe.knowledge_base.retrieve import KnowledgeBase

eval_app = typer.Typer(help="Evaluations with measured numbers.", no_args_is_help=True)


@eval_app.command("retrieval")
@user_errors
def retrieval(
    k: Annotated[int, typer.Option("--k", help="Cut-off for recall@k.")] = 5,
    queries: Annotated[Path, typer.Option("--queries", help="Labelled queries (JSONL).")] = QUERIES,
    index: Annotated[Path | None, typer.Option("--index", help="Index directory.")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Recall@k and MRR of dense, BM25 and hybrid search on the labelled queries."""
    kb = KnowledgeBase(index_dir=index)
    labelled = load_queries(queries, set(kb.by_id))
    scores = evaluate(kb, labelled, k)
    if as_json:
        print(
            json.dumps(
                {"queries": len(labelled), "k": k, "modes": [asdict(s) for s in scores]}, indent=2
            )
        )
        return
    out.print(f"{len(labelled)} queries, {len(kb.docs)} documents, embedder {kb.embedder.name}")
    out.print(f"{'mode':8} {'recall@' + str(k):>9} {'MRR':>6} {'hit@' + str(k):>6}")
    for s in scores:
        out.print(f"{s.mode:8} {s.recall_at_k:9.3f} {s.mrr:6.3f} {s.hit_at_k:6.3f}")
