"""Reading a model's answer: the JSON in it (repaired when cut short), and each item's verdict.

Small local models, and any endpoint answering in plain text, wrap JSON in prose or code
fences, stop mid-answer at ``max_tokens``, or leave a trailing comma. :func:`extract_json`
finds the JSON and, when it is cut short, keeps every item that was complete. Each item is then
validated on its own (:func:`parse_proposals`): one bad item is dropped with its reason and the
rest of the answer is kept.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import ValidationError

from autofe.agents.llm import DroppedProposal, Proposal

FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)(?:```|$)", re.DOTALL)
TRAILING_COMMA = re.compile(r",(\s*[}\]])")
CLOSER = {"{": "}", "[": "]"}


class Malformed(Exception):
    """The answer holds no JSON of the expected shape; worth asking again."""


def extract_json(text: str) -> Any:
    """The JSON value in ``text``: as is, inside a code fence or prose, or repaired.

    >>> extract_json('Sure! ```json\\n{"proposals": [{"a": 1}]}\\n```')
    {'proposals': [{'a': 1}]}
    >>> extract_json('{"proposals": [{"a": 1}, {"a": 2}, {"a"')
    {'proposals': [{'a': 1}, {'a': 2}]}

    Raises:
        Malformed: there is no JSON object or array in the text.
    """
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    fenced = FENCE.search(text)
    body = fenced.group(1) if fenced else text
    start = min((i for i in (body.find("{"), body.find("[")) if i >= 0), default=-1)
    if start < 0:
        raise Malformed(f"no JSON in the answer: {one_line(text)}")
    body = body[start:]
    try:
        return json.JSONDecoder().raw_decode(body)[0]
    except json.JSONDecodeError:
        pass
    repaired = repair(body)
    if repaired is None:
        raise Malformed(f"JSON that cannot be repaired: {one_line(body)}")
    return repaired


def repair(text: str) -> Any:
    """The longest prefix of ``text`` that is valid JSON once its open brackets are closed.

    Tried at every point where a value just ended (a ``}``, ``]`` or a string's end), the
    latest first, with trailing commas removed: a cut-short answer keeps its complete items.
    None when no prefix parses.
    """
    for end, closers in reversed(_value_ends(text)):
        candidate = TRAILING_COMMA.sub(r"\1", text[:end] + closers)
        try:
            return json.loads(candidate)
        except json.JSONDecodeError:
            continue
    return None


def _value_ends(text: str) -> list[tuple[int, str]]:
    """Each position just after a closed bracket, with the closers the open ones then need."""
    stack: list[str] = []
    ends: list[tuple[int, str]] = []
    in_string = escaped = False
    for i, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            continue
        if char == '"':
            in_string = True
        elif char in CLOSER:
            stack.append(CLOSER[char])
        elif char in "}]" and stack:
            stack.pop()
            ends.append((i + 1, "".join(reversed(stack))))
            if not stack:
                break
    return ends


def proposal_items(content: str | None) -> list[Any]:
    """The ``proposals`` list of an answer (a bare list of items is accepted as that list).

    Raises:
        Malformed: no content, no JSON, or JSON without a proposals list.
    """
    if not content or not content.strip():
        raise Malformed("empty answer")
    data = extract_json(content)
    if isinstance(data, list):
        return data
    items = data.get("proposals") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise Malformed("JSON without a proposals list")
    return items


def parse_proposals(
    items: list[Any], limit: int, taken: frozenset[str] = frozenset()
) -> tuple[list[Proposal], list[DroppedProposal]]:
    """Valid proposals (first ``limit``, first of each name) and every dropped item with why.

    ``taken``: names proposed earlier in the round (a repeat is dropped).

    >>> ok = {"name": "a", "sql": "SELECT 1", "category": "calendar"}
    >>> props, bad = parse_proposals([ok, ok, {"name": "B!", "sql": "x", "category": "x"}], 5)
    >>> [p.name for p in props], [d.reason for d in bad][0]
    (['a'], 'repeats the name of an earlier item')
    """
    proposals: list[Proposal] = []
    dropped: list[DroppedProposal] = []
    seen: set[str] = set(taken)
    for item in items:
        name = str(item.get("name", ""))[:80] if isinstance(item, dict) else ""
        try:
            proposal = Proposal.model_validate(item)
        except ValidationError as exc:
            dropped.append(DroppedProposal(name=name or "?", reason=validation_reason(exc)))
            continue
        if proposal.name in seen:
            dropped.append(DroppedProposal(name=name, reason="repeats the name of an earlier item"))
            continue
        seen.add(proposal.name)
        if len(proposals) < limit:
            proposals.append(proposal)
        else:
            dropped.append(DroppedProposal(name=name, reason=f"beyond the {limit} asked for"))
    return proposals, dropped


def validation_reason(exc: ValidationError) -> str:
    """The first problem pydantic found, as one short line naming the field.

    >>> try:
    ...     Proposal.model_validate({"name": "a", "sql": "SELECT 1", "category": "vibes"})
    ... except ValidationError as exc:
    ...     validation_reason(exc).startswith("category: Input should be")
    True
    """
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error.get("loc", ())) or "item"
    message = str(error.get("msg", "invalid"))
    if error.get("type") == "model_type":
        message = "not an object with name, sql and category"
    return one_line(f"{where}: {message}", 200)


def one_line(text: str, limit: int = 120) -> str:
    """One line of at most ``limit`` characters.

    >>> one_line("a\\n b" + "c" * 300, 10)
    'a bcccccc…'
    """
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
