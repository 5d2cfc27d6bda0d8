"""The persistent dense index: a chromadb collection of document chunks, rebuilt only on change.

Each document is cut into a head chunk (title, tags, signals) and body chunks of about
``CHUNK_WORDS`` words (MiniLM reads the first 256 word pieces of each); a document scores as the
sum of its two best chunks, so one that matches in its signals *and* its body outranks one with a
single lucky chunk. Chunk size and scoring were chosen on half of the labelled queries and hold
on the other half (docs/kb.md).

The collection's metadata records the corpus hash and the embedder, so :func:`open_index`
reuses an index that matches and rebuilds one that does not — including one it cannot read at
all (a cache directory is disposable; a crash over it is not). Each corpus and embedder has a
store of its own under the index directory, opened and built under a file lock: two versions of
autofe sharing a cache (a nightly job's and a newer CLI's) used to rebuild one collection under
each other, and the other process's next query failed with chromadb's ``NotFoundError``.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autofe.errors import KnowledgeBaseError
from autofe.knowledge_base.corpus import Document, corpus_hash
from autofe.knowledge_base.embeddings import Embedder

log = logging.getLogger(__name__)

COLLECTION = "autofe-kb"
CHUNK_WORDS = 250
TOP_CHUNKS = 2


@dataclass(frozen=True)
class Chunk:
    doc_id: str
    part: int
    text: str


@dataclass
class DenseIndex:
    """An open collection and its embedder; ``built`` says whether this call built it."""

    collection: Any
    embedder: Embedder
    built: bool
    build_seconds: float

    def rank(self, query: str, n_docs: int) -> list[tuple[str, float]]:
        """Document ids with the summed similarity of their best chunks, best first.

        Raises:
            KnowledgeBaseError: the store cannot be read (removed or damaged under us).
        """
        vector = self.embedder.embed([query])[0]
        try:
            count = self.collection.count()
            found = self.collection.query(
                query_embeddings=[vector], n_results=count, include=["distances", "metadatas"]
            )
        except Exception as exc:  # chromadb raises many types for a store gone or damaged
            raise KnowledgeBaseError(
                f"the knowledge-base index cannot be read ({type(exc).__name__}: {exc}); "
                "run the command again to rebuild it"
            ) from exc
        sims: dict[str, list[float]] = {}
        for meta, distance in zip(found["metadatas"][0], found["distances"][0], strict=True):
            sims.setdefault(str(meta["doc"]), []).append(1.0 - float(distance))
        scores = {d: sum(sorted(s, reverse=True)[:TOP_CHUNKS]) for d, s in sims.items()}
        return sorted(scores.items(), key=lambda item: -item[1])[:n_docs]


def chunks(doc: Document) -> list[Chunk]:
    """The head chunk and the body cut at paragraph breaks into ~``CHUNK_WORDS``-word pieces."""
    head = "\n".join((doc.title, ", ".join(doc.tags), *doc.signals))
    pieces: list[Chunk] = [Chunk(doc.id, 0, head)]
    current: list[str] = []
    for paragraph in (p.strip() for p in doc.body.split("\n\n")):
        current.append(paragraph)
        if sum(len(p.split()) for p in current) >= CHUNK_WORDS:
            pieces.append(Chunk(doc.id, len(pieces), f"{doc.title}\n" + "\n".join(current)))
            current = []
    if current:
        pieces.append(Chunk(doc.id, len(pieces), f"{doc.title}\n" + "\n".join(current)))
    return pieces


def open_index(directory: Path, docs: tuple[Document, ...], embedder: Embedder) -> DenseIndex:
    """The index for ``docs`` under ``directory``: reused when current, else (re)built, in the
    store of this corpus and embedder (:func:`store_dir`), under its lock.

    Raises:
        KnowledgeBaseError: the directory cannot be created.
    """
    want = {"corpus": corpus_hash(docs), "embedder": embedder.name}
    store = store_dir(directory, want)
    with _locked(store):
        try:
            client = _client(store)
            collection = _current(client, want)
        except KnowledgeBaseError:
            raise
        except Exception as exc:  # chromadb raises many types for a damaged store
            log.warning("knowledge-base index at %s unreadable (%s); rebuilding", store, exc)
            _forget(store)
            shutil.rmtree(store, ignore_errors=True)
            client, collection = _client(store), None
        if collection is not None:
            return DenseIndex(collection, embedder, built=False, build_seconds=0.0)
        started = time.perf_counter()
        collection = _build(client, docs, embedder, want)
        return DenseIndex(collection, embedder, True, time.perf_counter() - started)


def store_dir(directory: Path, want: dict[str, str]) -> Path:
    """The store of one corpus and embedder under the index directory.

    >>> store_dir(Path("/cache/kb-index"), {"corpus": "abc", "embedder": "hashing-256"}).name
    '77bfedf6603b3b43'
    """
    key = "\n".join(f"{k}={want[k]}" for k in sorted(want))
    return directory / hashlib.sha256(key.encode()).hexdigest()[:16]


@contextmanager
def _locked(store: Path) -> Iterator[None]:
    """Hold ``store``'s lock file (beside it): one process opens or builds a store at a time."""
    _make_dir(store.parent)
    with open(store.parent / f"{store.name}.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _make_dir(directory: Path) -> None:
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise KnowledgeBaseError(f"{directory}: cannot create the index directory ({exc})") from exc


def _client(directory: Path) -> Any:
    import chromadb
    from chromadb.config import Settings

    _make_dir(directory)
    return chromadb.PersistentClient(
        path=str(directory), settings=Settings(anonymized_telemetry=False, allow_reset=True)
    )


def _forget(directory: Path) -> None:
    """Drop chromadb's in-process cache entry for ``directory``.

    chromadb keeps one "system" per path for the life of the process; after a failed open that
    entry is half-initialised and every later client for the path fails while stopping it.
    """
    from chromadb.api.shared_system_client import SharedSystemClient

    SharedSystemClient._identifier_to_system.pop(str(directory), None)
    SharedSystemClient._identifier_to_refcount.pop(str(directory), None)


def _current(client: Any, want: dict[str, str]) -> Any | None:
    """The existing collection when it was built from the same corpus by the same embedder."""
    names = {c.name for c in client.list_collections()}
    if COLLECTION not in names:
        return None
    collection = client.get_collection(COLLECTION, embedding_function=None)
    meta = collection.metadata or {}
    if all(meta.get(k) == v for k, v in want.items()) and collection.count() > 0:
        return collection
    client.delete_collection(COLLECTION)
    return None


def _build(
    client: Any, docs: tuple[Document, ...], embedder: Embedder, want: dict[str, str]
) -> Any:
    pieces = [c for doc in docs for c in chunks(doc)]
    vectors = embedder.embed([c.text for c in pieces])
    collection = client.create_collection(
        COLLECTION, embedding_function=None, metadata={"hnsw:space": "cosine", **want}
    )
    collection.add(
        ids=[f"{c.doc_id}#{c.part}" for c in pieces],
        embeddings=vectors,
        metadatas=[{"doc": c.doc_id, "part": c.part} for c in pieces],
        documents=[c.text for c in pieces],
    )
    log.info("knowledge-base index built: %d documents, %d chunks", len(docs), len(pieces))
    return collection
