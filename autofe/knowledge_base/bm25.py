"""Okapi BM25 over the corpus: exact-term matching that dense embeddings blur.

Config names (``spark.sql.shuffle.partitions``), operators (``SortMergeJoin``) and error texts
are where lexical matching beats a 384-dimension sentence vector; the corpus is small, so the
index is built in memory each time in well under a millisecond per document.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

_TOKEN = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    re.findall(
        r"\w+",
        "a an and are as at be by for from has have in is it its of on or that the this to was "
        "were will with when what why how our we my i do does did after before than then",
    )
)


def tokenize(text: str) -> list[str]:
    """Lower-case word tokens without stop words, lightly stemmed.

    >>> tokenize("The joins were spilling to disk")
    ['join', 'spill', 'disk']
    """
    return [_stem(t) for t in _TOKEN.findall(text.lower()) if t not in _STOP]


def _stem(token: str) -> str:
    """Strip a few English suffixes so 'spilling', 'spills' and 'spill' meet."""
    for suffix in ("ing", "ies", "es", "ed", "s"):
        if token.endswith(suffix) and len(token) - len(suffix) >= 3:
            return token[: -len(suffix)] + ("y" if suffix == "ies" else "")
    return token


@dataclass(frozen=True)
class BM25:
    """A BM25 index over documents given as texts (k1 = 1.2, b = 0.75)."""

    docs: tuple[Counter[str], ...]
    lengths: tuple[int, ...]
    idf: dict[str, float]
    k1: float = 1.2
    b: float = 0.75

    @classmethod
    def build(cls, texts: Sequence[str]) -> BM25:
        docs = tuple(Counter(tokenize(t)) for t in texts)
        frequency: Counter[str] = Counter()
        for doc in docs:
            frequency.update(doc.keys())
        n = len(docs)
        idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in frequency.items()}
        return cls(docs, tuple(sum(d.values()) for d in docs), idf)

    def scores(self, query: str) -> list[float]:
        """One score per document, in corpus order."""
        terms = tokenize(query)
        mean = sum(self.lengths) / max(1, len(self.lengths))
        return [
            self._score(doc, length, terms, mean)
            for doc, length in zip(self.docs, self.lengths, strict=True)
        ]

    def _score(self, doc: Counter[str], length: int, terms: list[str], mean: float) -> float:
        total = 0.0
        for term in terms:
            tf = doc.get(term, 0)
            if tf:
                norm = tf + self.k1 * (1 - self.b + self.b * length / mean)
                total += self.idf[term] * tf * (self.k1 + 1) / norm
        return total
