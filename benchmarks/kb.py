"""Knowledge-base build time and query latency, dense / BM25 / hybrid, with the real model.

Run: ``.venv/bin/python benchmarks/kb.py [--queries 200] [--write docs/results.md]``

Build: a fresh index directory, the shipped corpus, MiniLM on CPU (model load counted
separately). Queries: the labelled evaluation queries, cycled; 20 warm-up queries first, then
``--queries`` timed calls of ``KnowledgeBase.search`` per mode (embedding the query included).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from report import machine, percentile, write_section

from autofe.evals.retrieval.evaluate import load_queries
from autofe.knowledge_base.embeddings import MiniLMEmbedder
from autofe.knowledge_base.retrieve import MODES, KnowledgeBase

WARM_UP = 20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--write", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        body = run(Path(tmp), args.queries)
    print(body)
    if args.write:
        write_section(args.write, "kb", body)


def run(tmp: Path, n: int) -> str:
    embedder = MiniLMEmbedder()
    started = time.perf_counter()
    embedder.embed(["warm the model"])
    load_s = time.perf_counter() - started
    kb = KnowledgeBase(index_dir=tmp / "index", embedder=embedder)
    dense = kb.dense()
    texts = [q.text for q in load_queries()]
    rows = [_latency(kb, texts, mode, n) for mode in MODES]
    reopen = time.perf_counter()
    KnowledgeBase(index_dir=tmp / "index", embedder=embedder).dense()
    reopen_s = time.perf_counter() - reopen
    lines = [
        f"Machine: {machine()}. Command: `.venv/bin/python benchmarks/kb.py --queries {n}`.",
        "",
        f"- corpus: {len(kb.docs)} documents, {dense.collection.count()} chunks",
        f"- model load (first embedding): {load_s:.2f} s",
        f"- index build (embed all chunks + chromadb write): {dense.build_seconds:.2f} s",
        f"- reopen an up-to-date index (corpus hash check): {reopen_s * 1000:.0f} ms",
        "",
        "| mode | p50 ms | p95 ms | max ms |",
        "|---|---|---|---|",
        *rows,
    ]
    return "\n".join(lines) + "\n"


def _latency(kb: KnowledgeBase, texts: list[str], mode: str, n: int) -> str:
    for text in texts[:WARM_UP]:
        kb.search(text, 5, mode)  # type: ignore[arg-type]
    times = []
    for i in range(n):
        started = time.perf_counter()
        kb.search(texts[i % len(texts)], 5, mode)  # type: ignore[arg-type]
        times.append((time.perf_counter() - started) * 1000)
    p50, p95 = percentile(times, 0.5), percentile(times, 0.95)
    return f"| {mode} | {p50:.1f} | {p95:.1f} | {max(times):.1f} |"


if __name__ == "__main__":
    main()
