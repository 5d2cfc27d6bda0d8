"""``--llm openai``: any OpenAI-compatible Chat Completions endpoint, through the ``openai`` SDK.

Endpoints differ in what they accept, and local ones are slow, so the backend adapts once per
run, from the endpoint's own answers, and says so in the batch's ``warnings``:

- **Structured output ladder** (:data:`~autofe.agents.llm.OUTPUT_FORMATS`): strict
  ``json_schema``; if the endpoint refuses it (an error naming ``response_format``) or answers
  with something that is not JSON, ``json_object`` with the schema; then plain text, from which
  the JSON is extracted and repaired. The first rung that gives JSON is kept for the run.
- **Context**: the prompt is trimmed to ``context_tokens`` (or the smaller limit the endpoint
  reports in ``/v1/models`` or in a context-length error) minus room for the answer.
- **Pacing**: proposals are asked for in batches. The first batch is small; its tokens per
  second size the next ones so a request takes about :data:`TARGET_REQUEST_S`. Answers stream,
  and ``timeout_s`` bounds the silence before the first token and between tokens, not the
  whole answer (a watchdog closes a stalled stream even while a server sends keep-alives).

Retries (``max_retries``, backoff 0.5 s doubling) cover timeouts, lost connections, 429, 5xx
and malformed answers. Transport failures after the last retry raise :class:`LLMError`.
"""

from __future__ import annotations

import logging
import math
import queue
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from autofe.agents.llm import (
    OUTPUT_FORMATS,
    DroppedProposal,
    LLMSettings,
    OutputFormat,
    PromptFit,
    Proposal,
    ProposalBatch,
    ProposalRequest,
    Usage,
)
from autofe.agents.llm_prompt import (
    build_messages,
    estimate_tokens,
    fit_request,
    prompt_hash,
    response_format,
)
from autofe.agents.llm_reply import Malformed, one_line, parse_proposals, proposal_items
from autofe.errors import LLMError

if TYPE_CHECKING:
    from openai import OpenAI
    from openai.types.chat import ChatCompletionMessageParam

log = logging.getLogger(__name__)

BACKOFF_BASE_S = 0.5
FIRST_BATCH = 3
"""Proposals asked for before the endpoint's speed is known."""
MAX_BATCH = 10
"""Most proposals per request when sized automatically: a failed request loses at most these."""
TARGET_REQUEST_S = 60.0
"""Seconds of generation an automatically sized request aims at."""
TOKENS_PER_PROPOSAL = 150
"""Answer tokens one proposal takes (name, SQL, rationale): about 120 measured with Gemma 3."""
ANSWER_TOKENS_PER_PROPOSAL = 400
"""``max_tokens`` per proposal asked for: room for a long SQL statement."""
PROMPT_READ_TOKENS_PER_S = 50.0
"""Prompt tokens a slow endpoint reads per second, allowed on top of ``--llm-timeout`` before
the first token: Gemma 3 270M read 25,614 tokens in 456 s on 2 busy cores (56 per second)."""
RETRY_TEMPERATURE = 0.7
"""Temperature of a request asked again after a malformed answer."""
MISSES_TO_STOP = 2
"""Requests in a row without a new valid proposal after which a round asks no more."""
FORMAT_WORDS = ("response_format", "json_schema", "json_object", "structured output")
CONTEXT_LIMIT = re.compile(
    r"(?:maximum context length is|context window of|context length (?:is|of)|n_ctx[ =:]*)"
    r"\s*(\d+)",
    re.IGNORECASE,
)
MODEL_LIMIT_KEYS = ("max_model_len", "context_length", "context_window", "n_ctx", "max_tokens")


class _Transient(Exception):
    """The endpoint timed out, stalled, dropped the connection, throttled (429) or failed."""


class _FormatRefused(Exception):
    """The endpoint refused the request's ``response_format`` (the ladder steps down)."""


class _ContextFull(Exception):
    """The endpoint said the prompt does not fit its context, and how large that is."""

    def __init__(self, limit: int, message: str) -> None:
        self.limit = limit
        super().__init__(message)


@dataclass
class _Answer:
    """One streamed answer, put back together."""

    content: str = ""
    refusal: str = ""
    finish: str | None = None
    usage: Usage = field(default_factory=Usage)
    chunks: int = 0
    generation_s: float = 0.0


@dataclass
class _Round:
    """What one ``propose`` call gathered over its requests."""

    proposals: list[Proposal] = field(default_factory=list)
    dropped: list[DroppedProposal] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    malformed: int = 0
    requests: int = 0
    refused: str | None = None
    hashes: list[str] = field(default_factory=list)
    fit: PromptFit | None = None

    def warn(self, message: str) -> None:
        log.warning("%s", message)
        self.warnings.append(message)


class OpenAIBackend:
    """An OpenAI-compatible endpoint; keeps what it learned about it (format, speed, context)
    for the rest of the run."""

    name = "openai"

    def __init__(self, settings: LLMSettings, sleep: Callable[[float], None] = time.sleep) -> None:
        self.settings = settings
        self._sleep = sleep
        fixed = settings.output_format != "auto"
        self.output_format: OutputFormat = (
            settings.output_format if settings.output_format != "auto" else "json_schema"
        )
        self.settled = fixed
        """Whether the format is decided (given, or an answer on it was JSON)."""
        self.tokens_per_s: float | None = None
        self.context_tokens = settings.context_tokens
        self._asked_models = False
        self._stream_usage = True
        self._varied = False

    def remember(self, rounds: Sequence[Mapping[str, Any]]) -> None:
        """Take up what earlier rounds of this run learned (a resumed run): the format the
        endpoint settled on, its speed and a smaller context it reported."""
        for r in rounds:
            if (
                r.get("output_format")
                and r.get("proposals")
                and self.settings.output_format == "auto"
            ):
                self.output_format, self.settled = r["output_format"], True
            self.tokens_per_s = r.get("tokens_per_s") or self.tokens_per_s
            prompt = r.get("prompt") or {}
            self.context_tokens = min(self.context_tokens, prompt.get("context_tokens") or 10**9)

    @property
    def endpoint(self) -> str:
        """The base URL requests go to (named in every error)."""
        return self.settings.base_url or "(no OPENAI_BASE_URL)"

    def propose(self, request: ProposalRequest) -> ProposalBatch:
        """Ask the endpoint for up to ``request.max_proposals`` features, in batches.

        Raises:
            LLMError: the endpoint stayed unreachable, throttled or failing after every retry,
                or answered with a non-retryable HTTP error (bad key, unknown model).
            ConfigError: the prompt's essentials do not fit the endpoint's context.
        """
        started = time.monotonic()
        gathered = _Round()
        with self._client() as client:
            self._learn_context(client, gathered)
            self._gather(client, request, gathered)
        seconds = Usage(seconds=time.monotonic() - started)
        return ProposalBatch(
            proposals=gathered.proposals,
            usage=gathered.usage + seconds,
            malformed=gathered.malformed + len(gathered.dropped),
            refused=gathered.refused,
            prompt_hash=gathered.hashes[0] if gathered.hashes else "",
            dropped=gathered.dropped,
            warnings=gathered.warnings,
            output_format=self.output_format,
            prompt=gathered.fit,
            batches=gathered.requests,
            tokens_per_s=round(self.tokens_per_s, 2) if self.tokens_per_s else None,
        )

    def _gather(self, client: OpenAI, request: ProposalRequest, gathered: _Round) -> None:
        """Requests until the round has its proposals, the model refuses, stops adding new
        ones, or answers malformed JSON on every attempt of a request."""
        wanted, misses = request.max_proposals, 0
        while len(gathered.proposals) < wanted and misses < MISSES_TO_STOP:
            size = min(self.batch_size(), wanted - len(gathered.proposals))
            before = len(gathered.proposals)
            asked = request.model_copy(update={"max_proposals": size})
            try:
                answered = self._one_request(client, asked, gathered)
            except LLMError as exc:
                if not gathered.proposals:
                    raise
                # a later request failed: the round keeps what the earlier ones brought
                gathered.warn(f"the round stops at {len(gathered.proposals)} proposals: {exc}")
                return
            if not answered or gathered.refused is not None:
                return
            misses = misses + 1 if len(gathered.proposals) == before else 0

    def batch_size(self) -> int:
        """Proposals the next request asks for: as given, or sized to the measured speed.

        >>> b = OpenAIBackend(LLMSettings(backend="openai"))
        >>> b.batch_size(), setattr(b, "tokens_per_s", 12.0), b.batch_size()
        (3, None, 4)
        """
        if self.settings.batch_size is not None:
            return self.settings.batch_size
        if self.tokens_per_s is None:
            return FIRST_BATCH
        fits = math.floor(self.tokens_per_s * TARGET_REQUEST_S / TOKENS_PER_PROPOSAL)
        return max(1, min(MAX_BATCH, fits))

    def _one_request(self, client: OpenAI, request: ProposalRequest, gathered: _Round) -> bool:
        """One batch: its prompt fitted, asked with retries, its items judged one by one.

        False when no answer held items (malformed on every attempt, or a refusal).
        """
        names = [p.name for p in gathered.proposals]
        items = self._ask(client, request, names, gathered)
        if items is None:
            return False
        proposals, dropped = parse_proposals(items, request.max_proposals, frozenset(names))
        gathered.proposals += proposals
        gathered.dropped += dropped
        return True

    def answer_tokens(self, proposals: int) -> int:
        """``max_tokens`` of a request for ``proposals``: room for each, at most half the
        context (the prompt needs the rest).

        >>> OpenAIBackend(LLMSettings(backend="openai")).answer_tokens(3)
        1264
        """
        return min(proposals * ANSWER_TOKENS_PER_PROPOSAL + 64, self.context_tokens // 2)

    def _messages(
        self, request: ProposalRequest, names: Sequence[str], gathered: _Round
    ) -> list[ChatCompletionMessageParam]:
        answer = self.answer_tokens(request.max_proposals)
        fmt = self.output_format

        def measure(r: ProposalRequest) -> int:
            return estimate_tokens(build_messages(r, fmt, names, gathered.dropped))

        fitted, fit = fit_request(request, self.context_tokens, answer, measure)
        if (gathered.fit is None or fit.cut != gathered.fit.cut) and fit.cut:
            log.info("prompt fitted to %d tokens: cut %s", fit.budget_tokens, fit.cut)
        gathered.fit = fit
        return build_messages(fitted, fmt, names, gathered.dropped)

    def _ask(
        self, client: OpenAI, request: ProposalRequest, names: Sequence[str], gathered: _Round
    ) -> list[Any] | None:
        """The retry loop for one batch: its items, or None (malformed every time, refused).

        Stepping down the format ladder or shrinking to a reported context is not a retry.
        """
        attempt, failure = 0, None
        while attempt <= self.settings.max_retries:
            messages = self._messages(request, names, gathered)
            gathered.hashes.append(prompt_hash(messages))
            gathered.requests += 1
            gathered.usage += Usage(requests=1)
            try:
                answer = self._stream(client, messages, request.max_proposals, gathered)
            except _FormatRefused as exc:
                if self._step_down(f"the endpoint refused it: {exc}", gathered):
                    continue
                raise LLMError(self.endpoint, str(exc)) from exc
            except _ContextFull as exc:
                if self._shrink(exc, messages, gathered):
                    continue
                raise LLMError(self.endpoint, str(exc)) from exc
            except _Transient as exc:
                failure = exc
                gathered.warn(f"LLM request failed (attempt {attempt + 1}): {exc}")
            else:
                failure = None
                items = self._items(answer, gathered)
                if items is not None or gathered.refused is not None:
                    self._varied = False
                    return items
                self._varied = True  # the same prompt at temperature 0 gives the same answer
                if self._ignored_format(answer) and self._step_down(
                    "the answer held no JSON", gathered
                ):
                    continue
            attempt += 1
            if attempt <= self.settings.max_retries:
                self._sleep(BACKOFF_BASE_S * 2 ** (attempt - 1))
        if failure is not None:
            raise LLMError(self.endpoint, f"{failure} (after {self.settings.max_retries} retries)")
        return None

    def _items(self, answer: _Answer, gathered: _Round) -> list[Any] | None:
        """The answer's items, its refusal recorded, or None when it is malformed."""
        if answer.refusal or answer.finish == "content_filter":
            gathered.refused = answer.refusal or (
                "the endpoint's content filter stopped the answer (finish_reason content_filter)"
            )
            return None
        try:
            items = proposal_items(answer.content)
        except Malformed as exc:
            gathered.malformed += 1
            gathered.warn(
                f"LLM answer on {self.output_format} was malformed (finish_reason "
                f"{answer.finish}, {len(answer.content)} characters, ending "
                f"{one_line(answer.content[-80:], 80)!r}): {exc}"
            )
            return None
        self.settled = True
        return items

    def _ignored_format(self, answer: _Answer) -> bool:
        """Whether an unsettled endpoint answered prose: it does not honour this format."""
        return not self.settled and "{" not in answer.content and "[" not in answer.content

    def _step_down(self, why: str, gathered: _Round) -> bool:
        """Move to the next rung of the ladder (False when there is none or it is fixed)."""
        rung = OUTPUT_FORMATS.index(self.output_format)
        if self.settings.output_format != "auto" or rung + 1 >= len(OUTPUT_FORMATS):
            return False
        lower = OUTPUT_FORMATS[rung + 1]
        gathered.warn(f"structured output {self.output_format}: {why}; using {lower}")
        self.output_format = lower
        return True

    def _shrink(
        self, exc: _ContextFull, messages: list[ChatCompletionMessageParam], gathered: _Round
    ) -> bool:
        """Fit later prompts to the context the endpoint reported (False: already did)."""
        sent = estimate_tokens(messages)
        limit = exc.limit if exc.limit < self.context_tokens else math.floor(sent * 0.8)
        if limit >= self.context_tokens or limit < 256:
            return False
        gathered.warn(f"the endpoint's context is {exc.limit} tokens: prompts fitted to {limit}")
        self.context_tokens = limit
        return True

    def _learn_context(self, client: OpenAI, gathered: _Round) -> None:
        """The context size ``/v1/models`` reports for the model, once (many servers report
        none; then the setting stands until a context-length error says otherwise)."""
        if self._asked_models:
            return
        self._asked_models = True
        try:
            listed = client.models.list()
        except Exception:  # an optional endpoint: any failure means "not reported"
            return
        for entry in getattr(listed, "data", []) or []:
            extra = {**(getattr(entry, "model_extra", None) or {}), **_meta(entry)}
            limits = [int(v) for k in MODEL_LIMIT_KEYS if isinstance(v := extra.get(k), int)]
            if entry.id == self.settings.model or len(listed.data) == 1:
                if limits and min(limits) < self.context_tokens:
                    gathered.warn(
                        f"the endpoint reports a {min(limits)}-token context for "
                        f"{entry.id}: prompts fitted to it"
                    )
                    self.context_tokens = min(limits)
                return

    def _client(self) -> OpenAI:
        from openai import OpenAI

        # The SDK's own retries are off: ours also cover malformed answers and count tokens.
        # Its timeout bounds the wait for the response's headers and for each read.
        return OpenAI(
            base_url=self.settings.base_url,
            api_key=self.settings.api_key,
            timeout=self.settings.timeout_s,
            max_retries=0,
        )

    def _stream(
        self,
        client: OpenAI,
        messages: list[ChatCompletionMessageParam],
        proposals: int,
        gathered: _Round,
    ) -> _Answer:
        """One streamed Chat Completions call, put back together; usage added to ``gathered``.

        Raises:
            _Transient: timeout, stall, lost connection, 429 or 5xx.
            _FormatRefused, _ContextFull: the endpoint refused the format or the prompt's size.
            LLMError: any other HTTP error (retrying a bad key or model name cannot help).
        """
        started = time.monotonic()
        first_wait = self.first_token_wait(messages)
        stream = self._create(client, messages, proposals, first_wait)
        answer = _read_stream(stream, self.settings.timeout_s, first_wait)
        reported = answer.usage
        usage = Usage(
            prompt_tokens=reported.prompt_tokens or estimate_tokens(messages),
            completion_tokens=reported.completion_tokens or answer.chunks,
        )
        gathered.usage += usage
        if self.tokens_per_s is None and answer.generation_s > 0.5 and usage.completion_tokens:
            self.tokens_per_s = usage.completion_tokens / answer.generation_s
            log.info(
                "endpoint speed %.1f tokens/s (%.1f s for the first request)",
                self.tokens_per_s,
                time.monotonic() - started,
            )
        return answer

    def temperature(self) -> float:
        """The request's temperature: the setting, or at least :data:`RETRY_TEMPERATURE` when
        the last answer was malformed (at temperature 0 the same prompt gives the same answer,
        so asking again unchanged only repeats it: seen with Gemma 3 270M)."""
        if self._varied:
            return max(self.settings.temperature, RETRY_TEMPERATURE)
        return self.settings.temperature

    def first_token_wait(self, messages: Sequence[ChatCompletionMessageParam]) -> float:
        """Seconds to wait for the first token: the timeout plus the time a slow CPU server
        needs to read the prompt (:data:`PROMPT_READ_TOKENS_PER_S`), which is no stall.

        >>> OpenAIBackend(LLMSettings(backend="openai")).first_token_wait(
        ...     [{"role": "user", "content": "x" * 35_000}])
        279.0
        """
        return float(
            self.settings.timeout_s + round(estimate_tokens(messages) / PROMPT_READ_TOKENS_PER_S)
        )

    def _create(
        self,
        client: OpenAI,
        messages: list[ChatCompletionMessageParam],
        proposals: int,
        first_wait: float,
    ) -> Any:
        """Send the request; the open stream, or the failure sorted by what can be done."""
        import openai

        options: dict[str, Any] = {}
        chosen = response_format(self.output_format)
        if chosen is not None:
            options["response_format"] = chosen
        if self._stream_usage:
            options["stream_options"] = {"include_usage": True}
        try:
            return client.chat.completions.create(
                model=self.settings.model,
                messages=messages,
                temperature=self.temperature(),
                max_tokens=self.answer_tokens(proposals),
                stream=True,
                timeout=first_wait,
                **options,
            )
        except openai.APITimeoutError as exc:
            raise _Transient(f"timed out after {first_wait:g} s waiting for an answer") from exc
        except openai.APIConnectionError as exc:
            raise _Transient(f"connection failed: {exc}") from exc
        except openai.APIStatusError as exc:
            raise self._sorted(exc) from exc

    def _sorted(self, exc: Any) -> Exception:
        """An HTTP error as the exception saying what to do about it."""
        message = one_line(str(exc.message), 200)
        reason = f"HTTP {exc.status_code}: {message}"
        lowered = message.lower()
        if (limit := CONTEXT_LIMIT.search(message)) is not None:
            return _ContextFull(int(limit.group(1)), reason)
        if "stream_options" in lowered and self._stream_usage:
            self._stream_usage = False  # asked again without it: the next attempt
            return _Transient(f"{reason} (asking again without stream_options)")
        if self.output_format != "text" and any(word in lowered for word in FORMAT_WORDS):
            return _FormatRefused(reason)
        if exc.status_code == 429 or exc.status_code >= 500:
            return _Transient(reason)
        return LLMError(self.endpoint, reason)


def _meta(entry: Any) -> dict[str, Any]:
    """llama.cpp's server reports the model's facts under ``meta`` (``n_ctx_train``...)."""
    meta = (getattr(entry, "model_extra", None) or {}).get("meta")
    return {"n_ctx": meta.get("n_ctx")} if isinstance(meta, dict) and "n_ctx" in meta else {}


def _read_stream(stream: Any, timeout_s: float, first_wait: float) -> _Answer:
    """Every chunk of a stream, giving up after ``timeout_s`` without one (``first_wait``
    before the first chunk holding content: the server is still reading the prompt).

    The chunks are read in a helper thread and waited for here, so a server that keeps the
    connection alive with SSE comments (which the SDK never hands over) while its model is
    stuck still times out; the abandoned reader ends when its connection is closed.

    Raises:
        _Transient: the stream stalled, the connection was lost, or it ended with no answer.
    """
    chunks: queue.Queue[tuple[str, Any]] = queue.Queue()
    threading.Thread(target=_pump, args=(stream, chunks), daemon=True).start()
    answer = _Answer()
    first: float | None = None
    while True:
        try:
            kind, value = chunks.get(timeout=timeout_s if first is not None else first_wait)
        except queue.Empty:
            threading.Thread(target=stream.close, daemon=True).start()
            waited = timeout_s if first is not None else first_wait
            raise _Transient(
                f"timed out after {waited:g} s without output (the answer stalled)"
            ) from None
        if kind == "end":
            break
        if kind == "error":
            if _transport_error(value):
                raise _Transient(f"connection lost mid-answer: {one_line(str(value))}") from value
            raise value
        _add_chunk(answer, value)
        if first is None and (answer.content or answer.refusal or answer.finish):
            first = time.monotonic()  # the role-only chunk some servers send at once is no token
    if answer.finish is None:
        # every OpenAI-compatible server ends an answer with a finish_reason: this one broke off
        got = f" after {len(answer.content)} characters" if answer.content else ""
        raise _Transient(f"connection lost mid-answer: the stream ended{got} without finishing")
    answer.generation_s = time.monotonic() - first if first is not None else 0.0
    return answer


def _transport_error(exc: BaseException) -> bool:
    """Whether ``exc`` is the connection failing (the SDK's HTTP stack, whichever it is)."""
    import openai

    stack = type(exc).__module__.split(".")[0]
    return isinstance(exc, openai.APIError | OSError) or stack in ("httpx", "httpx2", "httpcore")


def _pump(stream: Any, chunks: queue.Queue[tuple[str, Any]]) -> None:
    """Hand every chunk of ``stream`` over, then the end or the error that stopped it."""
    try:
        for chunk in stream:
            chunks.put(("chunk", chunk))
    except Exception as exc:  # handed to the waiting thread, which sorts it
        chunks.put(("error", exc))
    else:
        chunks.put(("end", None))


def _add_chunk(answer: _Answer, chunk: Any) -> None:
    answer.chunks += bool(getattr(chunk, "choices", None))
    reported = getattr(chunk, "usage", None)
    if reported is not None:
        answer.usage = Usage(
            prompt_tokens=getattr(reported, "prompt_tokens", 0) or 0,
            completion_tokens=getattr(reported, "completion_tokens", 0) or 0,
        )
    for choice in getattr(chunk, "choices", None) or []:
        delta = choice.delta
        answer.content += getattr(delta, "content", None) or ""
        answer.refusal += getattr(delta, "refusal", None) or ""
        answer.finish = choice.finish_reason or answer.finish
