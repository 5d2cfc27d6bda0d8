"""Measure retrieval: recall@k and MRR of dense, BM25 and hybrid search on labelled queries.

``queries.jsonl`` holds symptoms as users and agents phrase them, each with the ids of the
documents that answer it (best first). Recall@k is the share of a query's relevant documents in
its top k, averaged over queries; MRR is the mean reciprocal rank of the first relevant one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from autofe.errors import KnowledgeBaseError
from autofe.knowledge_base.retrieve import MODES, KnowledgeBase, Mode

QUERIES = Path(__file__).resolve().parent / "queries.jsonl"


@dataclass(frozen=True)
class Query:
    id: str
    text: str
    relevant: tuple[str, ...]


@dataclass(frozen=True)
class ModeScore:
    mode: Mode
    recall_at_k: float
    mrr: float
    hit_at_k: float
    misses: tuple[str, ...]
    """Ids of queries with no relevant document in the top k."""


def load_queries(path: Path = QUERIES, known: set[str] | None = None) -> list[Query]:
    """The labelled queries; a malformed line or an unknown document id names the line."""
    queries = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            queries.append(_query(path, number, line, known))
    if not queries:
        raise KnowledgeBaseError(f"{path}: no queries")
    return queries


def _query(path: Path, number: int, line: str, known: set[str] | None) -> Query:
    try:
        raw = json.loads(line)
        query = Query(str(raw["id"]), str(raw["query"]), tuple(raw["relevant"]))
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise KnowledgeBaseError(f"{path}:{number}: not a query object ({exc})") from exc
    unknown = [d for d in query.relevant if known is not None and d not in known]
    if unknown or not query.relevant:
        raise KnowledgeBaseError(f"{path}:{number}: relevant ids unknown or empty: {unknown}")
    return query


def evaluate(
    kb: KnowledgeBase, queries: list[Query], k: int = 5, modes: tuple[Mode, ...] = MODES
) -> list[ModeScore]:
    """Score every mode on every query."""
    return [_score(kb, queries, k, mode) for mode in modes]


def _score(kb: KnowledgeBase, queries: list[Query], k: int, mode: Mode) -> ModeScore:
    recall = reciprocal = hits = 0.0
    misses = []
    for query in queries:
        ranked = [h.doc_id for h in kb.search(query.text, len(kb.docs), mode)]
        found = set(ranked[:k]) & set(query.relevant)
        recall += len(found) / len(query.relevant)
        hits += 1.0 if found else 0.0
        first = next((i for i, d in enumerate(ranked, start=1) if d in query.relevant), None)
        reciprocal += 1.0 / first if first else 0.0
        if not found:
            misses.append(query.id)
    n = len(queries)
    return ModeScore(mode, recall / n, reciprocal / n, hits / n, tuple(misses))
