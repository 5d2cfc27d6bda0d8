"""Search the knowledge base: dense (MiniLM + chromadb), BM25, or both fused by reciprocal rank.

Hybrid is the shipped mode: symptoms phrased in plain words need the embedding, config names and
operator names need exact terms, and reciprocal-rank fusion combines the two without tuning
score scales (``autofe eval retrieval`` measures all three).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from autofe.config import kb_index_dir
from autofe.errors import KnowledgeBaseError
from autofe.knowledge_base.bm25 import BM25
from autofe.knowledge_base.corpus import CORPUS_DIR, Document, load_corpus
from autofe.knowledge_base.embeddings import Embedder, default_embedder
from autofe.knowledge_base.index import DenseIndex, open_index

Mode = Literal["dense", "bm25", "hybrid"]
MODES: tuple[Mode, ...] = get_args(Mode)
RRF_K = 60
"""Reciprocal-rank-fusion constant: rank 1 vs 2 of one ranker must not dominate the sum."""


@dataclass(frozen=True)
class Hit:
    """One retrieved document: its rank, fused score, and per-ranker ranks (1-based)."""

    rank: int
    doc_id: str
    title: str
    score: float
    dense_rank: int | None
    bm25_rank: int | None


class KnowledgeBase:
    """The corpus with its BM25 index and (lazily) its dense index."""

    def __init__(
        self,
        corpus_dir: Path = CORPUS_DIR,
        index_dir: Path | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        self.docs: tuple[Document, ...] = load_corpus(corpus_dir)
        self.by_id = {d.id: d for d in self.docs}
        self.index_dir = index_dir or kb_index_dir()
        self.embedder = embedder or default_embedder()
        self.bm25 = BM25.build([d.text for d in self.docs])
        self._dense: DenseIndex | None = None

    def dense(self) -> DenseIndex:
        """The dense index, opened (or built) on first use."""
        if self._dense is None:
            self._dense = open_index(self.index_dir, self.docs, self.embedder)
        return self._dense

    def search(self, query: str, k: int = 5, mode: Mode = "hybrid") -> list[Hit]:
        """The ``k`` best documents for ``query``."""
        _check(query, k, mode)
        dense = self._dense_ranks(query) if mode != "bm25" else {}
        lexical = self._bm25_ranks(query) if mode != "dense" else {}
        scores = {
            doc_id: sum(1.0 / (RRF_K + r[doc_id]) for r in (dense, lexical) if doc_id in r)
            for doc_id in {*dense, *lexical}
        }
        ordered = sorted(scores, key=lambda d: (-scores[d], d))[:k]
        return [
            Hit(i, d, self.by_id[d].title, round(scores[d], 6), dense.get(d), lexical.get(d))
            for i, d in enumerate(ordered, start=1)
        ]

    def _dense_ranks(self, query: str) -> dict[str, int]:
        ranked = self.dense().rank(query, len(self.docs))
        return {doc_id: i for i, (doc_id, _) in enumerate(ranked, start=1)}

    def _bm25_ranks(self, query: str) -> dict[str, int]:
        scores = self.bm25.scores(query)
        order = sorted((i for i, s in enumerate(scores) if s > 0), key=lambda i: -scores[i])
        return {self.docs[i].id: rank for rank, i in enumerate(order, start=1)}


def _check(query: str, k: int, mode: str) -> None:
    if not query.strip():
        raise KnowledgeBaseError("query: empty; describe the symptom or topic to search for")
    if k <= 0:
        raise KnowledgeBaseError(f"k: must be a positive number of results, got {k}")
    if mode not in MODES:
        raise KnowledgeBaseError(f"mode: {mode!r} is not one of {', '.join(MODES)}")
