"""The agent loop's state: what each node reads and the partial update it returns.

Lists that grow over the run (everything proposed, accepted, rejected, the per-iteration record)
carry an ``operator.add`` reducer, so a node returns only its new items; per-round fields
(``candidates``, ``feedback``) are replaced. Everything is plain JSON data, so
the SQLite checkpointer can store it and a resumed run continues from the last finished node.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import Annotated, Any, Literal, NotRequired, TypedDict

StopReason = Literal[
    "targets_met", "max_iterations", "budget_seconds", "budget_tokens", "no_candidates"
]
STOP_WORDS: dict[str, str] = {
    "targets_met": "the CV score met every target",
    "max_iterations": "the rounds asked for (--max-iterations) are done",
    "budget_seconds": "the time budget (--budget-seconds) ran out",
    "budget_tokens": "the LLM token budget (--budget-tokens) ran out",
    "no_candidates": "no candidates: the backend proposed nothing, or nothing passed the gates "
    "two rounds in a row",
}
"""Each stop reason in words, for the console and the report."""


class GateVerdict(TypedDict):
    """The extractor's verdict: the MCP ``materialize_feature`` answer for one feature."""

    feature_id: str
    """Where its values are in the feature store ('' when a tool failure stopped it)."""
    accepted: bool
    gate: str
    """The first rejecting gate ('' when accepted)."""
    reasons: list[str]
    coverage: float | None


class EvalVerdict(TypedDict):
    """Why the evaluator kept a feature."""

    importance: float
    psi: float
    iteration: int


class Feature(TypedDict):
    """One feature as the loop carries it, from proposal to catalog.

    The proposal's fields (the shape of :class:`autofe.agents.llm.Proposal`, plus origin);
    the extractor attaches ``gate``, the evaluator ``evaluation`` to the features it keeps,
    and finalize turns the kept ones into :class:`~autofe.featurespec.FeatureSpec`.
    """

    name: str
    sql: str
    category: str
    value_type: str
    rationale: str
    kb_refs: list[str]
    origin: str
    """How it was made: a recipe id, ``variant:<recipe>``, ``combine:<a>,<b>``, ``llm``."""
    gate: NotRequired[GateVerdict]
    evaluation: NotRequired[EvalVerdict]


class Dropped(TypedDict):
    """A candidate that did not make it: gate rejection or evaluator decision."""

    name: str
    stage: str
    """``gate:<name>``, ``quality``, ``stability``, ``lift``, ``whatif``, ``prune``, or
    ``all-runs`` (kept on a sample, but it cannot be computed on every run)."""
    reason: str
    iteration: int


class LLMRound(TypedDict):
    """What the backend did in one round: requests, the format and context it settled on,
    every proposal it dropped and why, a refusal, and the warnings on the way."""

    iteration: int
    backend: str
    output_format: str | None
    requests: int
    proposals: int
    malformed: int
    dropped: list[dict[str, str]]
    """``{"name", "reason"}`` of each item of an answer that did not become a proposal."""
    refused: str | None
    warnings: list[str]
    prompt: dict[str, Any] | None
    """How the prompt was fitted: context, budget, estimated tokens and what was cut."""
    tokens_per_s: float | None
    prompt_tokens: int
    completion_tokens: int
    seconds: float


class Iteration(TypedDict):
    """One round's numbers, for the report's per-iteration curve."""

    iteration: int
    proposed: int
    gated: int
    kept: int
    features: int
    cv_r2: float
    cv_mape: float
    whatif_mape: NotRequired[float | None]
    """MAPE of the set on configurations held out with their outcomes hidden (None: not
    scored, e.g. one configuration; absent in records written before the what-if score)."""
    seconds: dict[str, float]
    tokens: int
    malformed: NotRequired[int]
    """Items of the backend's answers dropped before the gates (see ``LoopState.llm``)."""


class LoopState(TypedDict, total=False):
    """The graph's state (every key optional: nodes return partial updates)."""

    iteration: int
    profile: dict[str, Any]
    """What the workspace holds (:func:`~autofe.agents.analyze.build_profile`), built once."""
    candidates: list[Feature]
    """This round's features: as proposed after analyze, with their gate verdict after extract."""
    feedback: dict[str, Any]
    proposed_ids: Annotated[list[str], operator.add]
    proposals: Annotated[list[Feature], operator.add]
    """Every feature proposed so far, as proposed."""
    kept: Annotated[list[Feature], operator.add]
    """Every feature kept so far, with both verdicts."""
    dropped: Annotated[list[Dropped], operator.add]
    history: Annotated[list[Iteration], operator.add]
    llm: Annotated[list[LLMRound], operator.add]
    """The backend's record of each round (:class:`LLMRound`)."""
    best_score: dict[str, float]
    tokens: int
    phase_seconds: dict[str, float]
    """Seconds of this round's phases so far (analyze, extract; the evaluate node records its
    own and its what-if stage's, ``evaluate`` and ``whatif``)."""
    final: dict[str, Any]
    """The finalize node's holdout metrics and model path."""
    pruned: list[str]
    """The kept features the finalize node pruned (:mod:`autofe.agents.prune`)."""
    stop_reason: StopReason | None


def final_features(state: Mapping[str, Any]) -> list[Feature]:
    """The features the run ships: every kept one but those the finalize node pruned.

    >>> state = {"kept": [{"name": "a"}, {"name": "b"}], "pruned": ["b"]}
    >>> final_features(state)
    [{'name': 'a'}]
    """
    pruned = set(state.get("pruned", []))
    return [k for k in state.get("kept", []) if k["name"] not in pruned]
