"""Retrieval: dense, BM25 and hybrid search; the persistent index and when it is rebuilt."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from autofe.errors import KnowledgeBaseError
from autofe.knowledge_base.corpus import CORPUS_DIR, corpus_hash
from autofe.knowledge_base.embeddings import HashingEmbedder, MiniLMEmbedder
from autofe.knowledge_base.index import chunks, open_index, store_dir
from autofe.knowledge_base.retrieve import KnowledgeBase


@pytest.fixture
def hashing_kb(tmp_path: Path) -> KnowledgeBase:
    return KnowledgeBase(index_dir=tmp_path / "index", embedder=HashingEmbedder())


@pytest.fixture
def minilm_kb(minilm_index: Path) -> KnowledgeBase:
    """The shipped configuration: the real offline MiniLM model."""
    return KnowledgeBase(index_dir=minilm_index, embedder=MiniLMEmbedder())


def test_exact_config_names_are_found_by_bm25_and_hybrid(hashing_kb: KnowledgeBase) -> None:
    for mode in ("bm25", "hybrid"):
        hits = hashing_kb.search("spark.sql.autoBroadcastJoinThreshold", 5, mode)
        assert "broadcast-threshold" in [h.doc_id for h in hits], mode


def test_hits_are_ranked_and_carry_both_ranks(hashing_kb: KnowledgeBase) -> None:
    hits = hashing_kb.search("straggler tasks from a hot join key", 4)
    assert [h.rank for h in hits] == [1, 2, 3, 4]
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert any(h.dense_rank and h.bm25_rank for h in hits)


def test_the_real_model_understands_paraphrase(minilm_kb: KnowledgeBase) -> None:
    query = "a few tasks in one stage take ten times longer than the rest"
    dense = [h.doc_id for h in minilm_kb.search(query, 5, "dense")]
    assert {"data-skew", "skew-joins", "speculation-stragglers"} & set(dense)
    assert len(minilm_kb.dense().embedder.embed(["x"])[0]) == 384


def test_the_index_is_rebuilt_only_when_the_corpus_changes(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    shutil.copytree(CORPUS_DIR, corpus)
    embedder = HashingEmbedder()
    kb = KnowledgeBase(corpus, tmp_path / "index", embedder)
    assert kb.dense().built
    again = KnowledgeBase(corpus, tmp_path / "index", embedder)
    assert not again.dense().built
    doc = next(corpus.glob("*.md"))
    doc.write_text(doc.read_text() + "\nOne more sentence.\n")
    changed = KnowledgeBase(corpus, tmp_path / "index", embedder)
    assert changed.dense().built
    other_embedder = KnowledgeBase(corpus, tmp_path / "index", HashingEmbedder(dim=64))
    assert other_embedder.dense().built


def test_an_unreadable_index_is_rebuilt_not_crashed_on(tmp_path: Path) -> None:
    index = tmp_path / "index"
    kb = KnowledgeBase(index_dir=index, embedder=HashingEmbedder())
    store = store_dir(index, {"corpus": corpus_hash(kb.docs), "embedder": kb.embedder.name})
    store.mkdir(parents=True)
    (store / "chroma.sqlite3").write_bytes(b"this is not a database" * 100)
    assert kb.dense().built
    assert kb.search("month end", 3)


def test_two_corpora_sharing_a_cache_do_not_break_each_other(tmp_path: Path) -> None:
    """A nightly job's autofe and a newer CLI, one cache: each corpus keeps a store of its own.
    Before, the newer one rebuilt the one collection and the older one's next query failed
    with chromadb's NotFoundError (a traceback out of ``autofe run``)."""
    older, newer = tmp_path / "older", tmp_path / "newer"
    shutil.copytree(CORPUS_DIR, older)
    shutil.copytree(CORPUS_DIR, newer)
    doc = next(newer.glob("*.md"))
    doc.write_text(doc.read_text() + "\nOne more sentence.\n")
    embedder, index = HashingEmbedder(), tmp_path / "index"
    first = KnowledgeBase(older, index, embedder)
    assert first.dense().built
    assert KnowledgeBase(newer, index, embedder).dense().built
    assert [h.doc_id for h in first.search("month end", 3, "dense")]
    assert not KnowledgeBase(older, index, embedder).dense().built


def test_chunks_keep_the_head_and_cover_the_body(hashing_kb: KnowledgeBase) -> None:
    doc = hashing_kb.by_id["data-skew"]
    parts = chunks(doc)
    assert parts[0].part == 0 and doc.title in parts[0].text
    body_words = sum(len(p.text.split()) for p in parts[1:])
    assert body_words >= len(doc.body.split())


@pytest.mark.parametrize(
    ("query", "k", "mode", "message"),
    [
        ("   ", 5, "hybrid", "query: empty"),
        ("skew", 0, "hybrid", "k: must be a positive"),
        ("skew", 5, "psychic", "mode: 'psychic'"),
    ],
)
def test_bad_search_arguments_are_clear_errors(
    hashing_kb: KnowledgeBase, query: str, k: int, mode: str, message: str
) -> None:
    with pytest.raises(KnowledgeBaseError, match=message):
        hashing_kb.search(query, k, mode)  # type: ignore[arg-type]


def test_an_uncreatable_index_directory_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(KnowledgeBaseError, match="cannot create the index directory"):
        open_index(blocker / "index", KnowledgeBase(index_dir=tmp_path).docs, HashingEmbedder())


def test_a_store_removed_under_a_command_is_a_clear_error(tmp_path: Path) -> None:
    """Another process deleting the collection mid-command (a cache is disposable) leaves this
    one a one-line error that says what to do, not chromadb's NotFoundError."""
    import chromadb

    index = tmp_path / "index"
    kb = KnowledgeBase(index_dir=index, embedder=HashingEmbedder())
    assert kb.dense().built
    store = store_dir(index, {"corpus": corpus_hash(kb.docs), "embedder": kb.embedder.name})
    settings = chromadb.config.Settings(anonymized_telemetry=False, allow_reset=True)
    chromadb.PersistentClient(path=str(store), settings=settings).delete_collection("autofe-kb")
    with pytest.raises(KnowledgeBaseError, match=r"index cannot be read .*run the command again"):
        kb.search("month end", 3, "dense")
