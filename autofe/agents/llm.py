"""The analyzer's language-model interface: requests, proposals, batches and settings.

The analyzer asks an :class:`LLMBackend` for candidate features given the workspace profile,
knowledge-base snippets and the evaluator's feedback. Two backends share the interface: the
offline deterministic planner (:mod:`~autofe.agents.planner`) and ``--llm openai``, any
OpenAI-compatible Chat Completions endpoint (:mod:`~autofe.agents.openai_backend`; its prompt
is :mod:`~autofe.agents.llm_prompt`, its reading of answers :mod:`~autofe.agents.llm_reply`).
:func:`autofe.agents.backends.make_backend` is the one place a backend is constructed.

A backend only proposes. Whether a proposal's SQL runs, names real columns or leaks the label is
the gates' job downstream: a hallucinated column comes back from here as the model wrote it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from autofe.errors import ConfigError
from autofe.featurespec import Category, FeatureSpec, Provenance, ValueType

BACKENDS: tuple[str, ...] = ("offline", "openai")
VALUE_TYPES: tuple[str, ...] = get_args(ValueType)
MIN_CONTEXT_TOKENS = 1024
OutputFormat = Literal["json_schema", "json_object", "text"]
OUTPUT_FORMATS: tuple[OutputFormat, ...] = ("json_schema", "json_object", "text")
"""The structured-output ladder, strictest first: strict JSON schema, JSON mode with the schema
(llama-cpp-python's form), plain text from which the JSON is extracted and repaired."""


class KnowledgeSnippet(BaseModel):
    """One knowledge-base passage the model may cite by ``doc_id`` in ``kb_refs``."""

    model_config = ConfigDict(frozen=True)

    doc_id: str
    title: str
    text: str


class ProposalRequest(BaseModel):
    """What the analyzer knows when it asks for features; every field reaches the model as data.

    ``profile`` is the workspace profile (schema with availability tags, job types, runtime
    distribution...), ``feedback`` the evaluator's (high-error segments, rejected features with
    reasons, importance of accepted ones).
    """

    model_config = ConfigDict(frozen=True)

    profile: dict[str, Any]
    knowledge: list[KnowledgeSnippet] = Field(default_factory=list)
    feedback: dict[str, Any] = Field(default_factory=dict)
    max_proposals: int = Field(default=20, ge=1)
    iteration: int = Field(default=0, ge=0)


class Proposal(BaseModel):
    """One candidate feature as a model proposed it; valid exactly when it makes a FeatureSpec."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    name: str
    sql: str
    category: Category
    value_type: ValueType = "DOUBLE"
    rationale: str = ""
    kb_refs: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _valid_as_spec(self) -> Proposal:
        # FeatureSpec owns the naming and SQL rules; checking here keeps one copy of them and
        # means every Proposal that exists converts.
        self.to_spec(backend="check", prompt_hash="")
        return self

    def to_spec(self, backend: str, prompt_hash: str) -> FeatureSpec:
        """The feature spec, with provenance naming the analyzer, the backend and the prompt.

        >>> p = Proposal(name="n_stages", sql="SELECT run_id, 1 AS value FROM runs",
        ...              category="script-plan")
        >>> p.to_spec("openai", "abc").provenance.backend
        'openai'
        """
        return FeatureSpec(
            name=self.name,
            sql=self.sql,
            category=self.category,
            value_type=self.value_type,
            rationale=self.rationale,
            kb_refs=tuple(self.kb_refs),
            provenance=Provenance(agent="analyzer", backend=backend, prompt_hash=prompt_hash),
        )


class Usage(BaseModel):
    """Tokens, HTTP requests and wall time spent, summed over every request including retries."""

    model_config = ConfigDict(frozen=True)

    prompt_tokens: int = 0
    completion_tokens: int = 0
    requests: int = 0
    seconds: float = 0.0

    def __add__(self, other: Usage) -> Usage:
        """Usage of both, so iterations and retries can be summed with ``+``.

        >>> (Usage(prompt_tokens=1, requests=1) + Usage(prompt_tokens=2, requests=1)).requests
        2
        """
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            requests=self.requests + other.requests,
            seconds=self.seconds + other.seconds,
        )

    def cost_usd(self, price_in_per_1k: float, price_out_per_1k: float) -> float:
        """What the tokens cost at the given prices (USD per 1,000 prompt / completion tokens).

        >>> Usage(prompt_tokens=2000, completion_tokens=500).cost_usd(0.15, 0.6)
        0.6
        """
        return (
            self.prompt_tokens * price_in_per_1k + self.completion_tokens * price_out_per_1k
        ) / 1000


class DroppedProposal(BaseModel):
    """One item of an answer that did not become a proposal, and why (fed back to the model)."""

    model_config = ConfigDict(frozen=True)

    name: str
    reason: str


class PromptFit(BaseModel):
    """How the prompt was fitted to the endpoint's context: the budget, the estimate of what
    was sent, and what was left out to get there (most useful parts are kept first)."""

    model_config = ConfigDict(frozen=True)

    context_tokens: int
    budget_tokens: int
    estimated_tokens: int
    cut: list[str] = Field(default_factory=list)


class ProposalBatch(BaseModel):
    """A backend's answer to one request.

    ``malformed`` counts answers that were not JSON of the schema (each retried) plus items
    dropped (``dropped`` says which and why). ``refused`` is the model's refusal text when it
    refused (then ``proposals`` may be short). ``warnings`` are what went wrong on the way
    (a format the endpoint refused, a retried timeout); ``output_format`` is the ladder rung
    the endpoint answered on; ``prompt`` how the last prompt was fitted to its context.
    """

    model_config = ConfigDict(frozen=True)

    proposals: list[Proposal] = Field(default_factory=list)
    usage: Usage = Usage()
    malformed: int = 0
    refused: str | None = None
    prompt_hash: str
    dropped: list[DroppedProposal] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    output_format: OutputFormat | None = None
    prompt: PromptFit | None = None
    batches: int = 0
    tokens_per_s: float | None = None

    def to_specs(self, backend: str) -> list[FeatureSpec]:
        """Every proposal as a FeatureSpec carrying this batch's prompt hash."""
        return [p.to_spec(backend, self.prompt_hash) for p in self.proposals]


class LLMBackend(Protocol):
    """Anything that turns a :class:`ProposalRequest` into candidate features."""

    name: str

    def propose(self, request: ProposalRequest) -> ProposalBatch:
        """Candidate features for the request; never raises for bad model output."""
        ...


@dataclass(frozen=True)
class LLMSettings:
    """Which backend the analyzer uses and how it talks to an OpenAI-compatible endpoint.

    ``timeout_s`` is an inactivity timeout: the longest wait for the answer's first token or
    between two tokens (answers stream), not a limit on the whole answer, so a slow CPU model
    that keeps producing tokens is never cut off. ``context_tokens`` is the prompt plus answer
    budget (the endpoint's own limit wins when it reports a smaller one). ``batch_size`` None
    sizes each request to the endpoint's measured speed; a number fixes it (reproducible
    prompts). ``output_format`` ``auto`` walks the structured-output ladder.
    """

    backend: Literal["offline", "openai"]
    model: str = "gpt-4o-mini"
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = 60
    max_retries: int = 3
    temperature: float = 0.0
    context_tokens: int = 8192
    batch_size: int | None = None
    output_format: Literal["auto", "json_schema", "json_object", "text"] = "auto"

    def __post_init__(self) -> None:
        if not self.timeout_s > 0:
            raise ConfigError(f"--llm-timeout must be more than 0 seconds, not {self.timeout_s}")
        if self.context_tokens < MIN_CONTEXT_TOKENS:
            raise ConfigError(
                f"--llm-context {self.context_tokens} is too small: the rules and the workspace "
                f"profile alone need about {MIN_CONTEXT_TOKENS} tokens"
            )
        if self.batch_size is not None and self.batch_size < 1:
            raise ConfigError(f"--llm-batch must be at least 1, not {self.batch_size}")
        if self.output_format not in ("auto", *OUTPUT_FORMATS):
            raise ConfigError(
                f"--llm-format {self.output_format!r} is not a format; choose one of "
                f"auto, {', '.join(OUTPUT_FORMATS)}"
            )

    @classmethod
    def from_env(cls, backend: str | None, model: str | None = None, **options: Any) -> LLMSettings:
        """Settings from the ``--llm`` / ``--model`` options and ``OPENAI_BASE_URL`` /
        ``OPENAI_API_KEY``; ``options`` are the other fields (``timeout_s``, ``context_tokens``,
        ``batch_size``, ``output_format``) as the command line gave them.

        The rule: ``backend=None`` always means ``"offline"``, even when both variables are set,
        so runs stay deterministic and nothing is sent to (or billed by) an endpoint unless
        ``--llm openai`` asks for it.

        Raises:
            ConfigError: unknown backend, or ``openai`` without both environment variables.
        """
        chosen = check_backend_name(backend or "offline")
        settings = cls(
            backend=chosen,
            model=model or cls.model,
            base_url=os.environ.get("OPENAI_BASE_URL") or None,
            api_key=os.environ.get("OPENAI_API_KEY") or None,
            **options,
        )
        if chosen == "openai":
            check_endpoint(settings)
        return settings


def check_backend_name(backend: str) -> Literal["offline", "openai"]:
    if backend == "offline":
        return "offline"
    if backend == "openai":
        return "openai"
    raise ConfigError(f"--llm {backend!r} is not a backend; choose one of {', '.join(BACKENDS)}")


def check_endpoint(settings: LLMSettings) -> None:
    values = {"OPENAI_BASE_URL": settings.base_url, "OPENAI_API_KEY": settings.api_key}
    missing = [var for var, value in values.items() if not value]
    if missing:
        raise ConfigError(
            f"--llm openai needs {' and '.join(missing)} set (the endpoint's base URL, e.g. "
            "https://api.openai.com/v1, and its API key)"
        )
