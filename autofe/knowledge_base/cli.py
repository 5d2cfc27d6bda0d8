"""``autofe kb``: build the knowledge-base index and search it."""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer

from autofe.console import out, user_errors
from autofe.knowledge_base.retrieve import KnowledgeBase, Mode

kb_app = typer.Typer(help="The Spark / ML runtime knowledge base.", no_args_is_help=True)

IndexOpt = Annotated[
    Path | None,
    typer.Option("--index", help="Index directory (default $AUTOFE_KB_DIR or ~/.cache/autofe)."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


@kb_app.command("build")
@user_errors
def build(index: IndexOpt = None, as_json: JsonOpt = False) -> None:
    """Build the index (only when the corpus or embedder changed since the last build)."""
    kb = KnowledgeBase(index_dir=index)
    dense = kb.dense()
    report = {
        "documents": len(kb.docs),
        "recipes": sum(len(d.recipes) for d in kb.docs),
        "chunks": dense.collection.count(),
        "built": dense.built,
        "build_seconds": round(dense.build_seconds, 3),
        "index": str(kb.index_dir),
        "embedder": kb.embedder.name,
    }
    if as_json:
        print(json.dumps(report, indent=2))
        return
    verb = f"built in {report['build_seconds']} s" if dense.built else "up to date"
    out.print(
        f"{report['documents']} documents, {report['recipes']} recipes, "
        f"{report['chunks']} chunks: index {verb} at {report['index']}"
    )


@kb_app.command("search")
@user_errors
def search(
    query: Annotated[str, typer.Argument(help="A symptom or topic, in plain words.")],
    k: Annotated[int, typer.Option("--k", help="Number of documents.")] = 5,
    mode: Annotated[str, typer.Option("--mode", help="hybrid, dense or bm25.")] = "hybrid",
    index: IndexOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The documents that best explain QUERY, with their feature recipes."""
    kb = KnowledgeBase(index_dir=index)
    started = time.perf_counter()
    hits = kb.search(query, k, _mode(mode))
    took = time.perf_counter() - started
    if as_json:
        rows = [
            {**asdict(h), "recipes": [r.name for r in kb.by_id[h.doc_id].recipes]} for h in hits
        ]
        print(
            json.dumps(
                {"query": query, "mode": mode, "seconds": round(took, 4), "hits": rows}, indent=2
            )
        )
        return
    for hit in hits:
        recipes = ", ".join(r.name for r in kb.by_id[hit.doc_id].recipes)
        out.print(f"{hit.rank}. [bold]{hit.doc_id}[/bold] — {hit.title}  ({recipes})")


def _mode(mode: str) -> Mode:
    """Validated in the search itself; the cast only narrows the type."""
    return mode  # type: ignore[return-value]
