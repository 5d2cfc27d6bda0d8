"""BM25 ranks exact terms; the tokenizer folds simple inflections."""

from __future__ import annotations

from autofe.knowledge_base.bm25 import BM25, tokenize


def test_inflections_meet() -> None:
    assert tokenize("spills spilled spill") == ["spill", "spill", "spill"]
    assert tokenize("Partitions") == ["partition"]


def test_rare_matching_terms_rank_first() -> None:
    index = BM25.build(
        [
            "shuffle partitions and shuffle files",
            "broadcast join threshold autoBroadcastJoinThreshold",
            "the job and the cluster",
        ]
    )
    scores = index.scores("autoBroadcastJoinThreshold too low")
    assert scores.index(max(scores)) == 1
    assert scores[2] == 0.0
