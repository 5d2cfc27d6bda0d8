"""The agent loop's state: what each node reads and the partial update it returns.

Lists that grow over the run (everything proposed, accepted, rejected, the per-iteration record)
carry an ``operator.add`` reducer, so a node returns only its new items; per-round fields
(``candidates``, ``materialized``, ``feedback``) are replaced. Everything is plain JSON data, so
the SQLite checkpointer can store it and a resumed run continues from the last finished node.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, Literal, TypedDict

StopReason = Literal[
    "targets_met", "max_iterations", "budget_seconds", "budget_tokens", "no_candidates"
]


class Candidate(TypedDict):
    """A proposed feature (the shape of :class:`autofe.agents.llm.Proposal`, plus origin)."""

    name: str
    sql: str
    category: str
    value_type: str
    rationale: str
    kb_refs: list[str]
    origin: str
    """How it was made: a recipe id, ``variant:<recipe>``, ``combine:<a>,<b>``, ``llm``."""


class Materialized(TypedDict):
    """The extractor's result for one candidate (the MCP ``materialize_feature`` answer)."""

    name: str
    feature_id: str
    accepted: bool
    gate: str
    """The first rejecting gate ('' when accepted)."""
    reasons: list[str]
    coverage: float | None


class Kept(TypedDict):
    """A feature the evaluator kept, with why."""

    name: str
    feature_id: str
    category: str
    sql: str
    rationale: str
    kb_refs: list[str]
    importance: float
    psi: float
    iteration: int


class Dropped(TypedDict):
    """A candidate that did not make it: gate rejection or evaluator decision."""

    name: str
    stage: str
    """``gate:<name>``, ``quality``, ``stability`` or ``lift``."""
    reason: str
    iteration: int


class Iteration(TypedDict):
    """One round's numbers, for the report's per-iteration curve."""

    iteration: int
    proposed: int
    gated: int
    kept: int
    features: int
    cv_r2: float
    cv_mape: float
    seconds: dict[str, float]
    tokens: int


class LoopState(TypedDict, total=False):
    """The graph's state (every key optional: nodes return partial updates)."""

    iteration: int
    candidates: list[Candidate]
    materialized: list[Materialized]
    feedback: dict[str, Any]
    proposed_ids: Annotated[list[str], operator.add]
    proposals: Annotated[list[Candidate], operator.add]
    """Every candidate proposed so far (value types and origins of kept features)."""
    kept: Annotated[list[Kept], operator.add]
    dropped: Annotated[list[Dropped], operator.add]
    history: Annotated[list[Iteration], operator.add]
    best_score: dict[str, float]
    tokens: int
    phase_seconds: dict[str, float]
    """Seconds of this round's phases so far (analyze, extract, evaluate)."""
    final: dict[str, Any]
    """The finalize node's holdout metrics and model path."""
    stop_reason: StopReason | None
