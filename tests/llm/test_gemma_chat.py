"""``tests/llm/gemma_chat.json``, the chat template the real-model check serves Gemma with.

Rendered here the way llama-cpp-python's ``hf-tokenizer-config`` chat format renders it (a
sandboxed Jinja environment with ``trim_blocks`` and ``lstrip_blocks``, an empty assistant
message appended as the generation prompt, no BOS added by the tokenizer), so a broken
template fails in the default suite, without the compiled server. ``test_real_model.py``
checks the same against the real server's token counts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

CONFIG = Path(__file__).with_name("gemma_chat.json")
GENERATE: dict[str, Any] = {"role": "assistant", "content": ""}
"""What llama-cpp-python appends to every request's messages before rendering."""


def render(messages: list[dict[str, Any]], **kwargs: Any) -> str:
    config = json.loads(CONFIG.read_text())
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    template = env.from_string(config["chat_template"])
    tokens = {"bos_token": config["bos_token"], "eos_token": config["eos_token"]}
    return template.render(messages=messages, **tokens, **kwargs)


def test_the_config_names_gemmas_special_tokens() -> None:
    config = json.loads(CONFIG.read_text())
    assert (config["bos_token"], config["eos_token"]) == ("<bos>", "<end_of_turn>")


def test_a_system_message_is_folded_into_the_user_turn() -> None:
    system = {"role": "system", "content": "Answer in JSON."}
    prompt = render([system, {"role": "user", "content": "Propose features."}, GENERATE])
    assert prompt == (
        "<bos><start_of_turn>user\nAnswer in JSON.\n\nPropose features.<end_of_turn>\n"
        "<start_of_turn>model\n"
    )


def test_every_system_message_goes_to_the_next_user_turn() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "S1"},
        {"role": "user", "content": "U1"},
        {"role": "assistant", "content": "A1"},
        {"role": "system", "content": "S2"},
        {"role": "system", "content": "S3"},
        {"role": "user", "content": [{"type": "text", "text": "U2"}]},
        GENERATE,
    ]
    assert render(messages) == (
        "<bos><start_of_turn>user\nS1\n\nU1<end_of_turn>\n"
        "<start_of_turn>model\nA1<end_of_turn>\n"
        "<start_of_turn>user\nS2\n\nS3\n\nU2<end_of_turn>\n"
        "<start_of_turn>model\n"
    )


@pytest.mark.parametrize(
    ("messages", "kwargs", "expected"),
    [
        pytest.param(
            [{"role": "system", "content": "only"}, GENERATE],
            {},
            "<bos><start_of_turn>user\nonly<end_of_turn>\n<start_of_turn>model\n",
            id="a system message with no user turn after it is still a user turn",
        ),
        pytest.param(
            [{"role": "user", "content": "hi"}],
            {"add_generation_prompt": True},
            "<bos><start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n",
            id="transformers' add_generation_prompt works too",
        ),
        pytest.param(
            [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
            {},
            "<bos><start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\nyo<end_of_turn>\n",
            id="a finished assistant turn is closed",
        ),
    ],
)
def test_edge_cases(messages: list[dict[str, Any]], kwargs: dict[str, Any], expected: str) -> None:
    assert render(messages, **kwargs) == expected
