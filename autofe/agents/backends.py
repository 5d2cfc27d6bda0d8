"""The one place an analyzer backend is constructed, from its settings."""

from __future__ import annotations

from collections.abc import Callable

from autofe.agents.llm import LLMBackend, LLMSettings, check_backend_name, check_endpoint
from autofe.agents.openai_backend import OpenAIBackend
from autofe.errors import ConfigError


def make_backend(
    settings: LLMSettings, offline_factory: Callable[[], LLMBackend] | None = None
) -> LLMBackend:
    """The backend the settings name.

    Args:
        settings: which backend, and the endpoint for ``openai``.
        offline_factory: builds the offline planner (the caller owns that module).

    Raises:
        ConfigError: unknown backend, no offline factory, or ``openai`` without URL/key.
    """
    backend = check_backend_name(settings.backend)
    if backend == "offline":
        if offline_factory is None:
            raise ConfigError("the offline planner is not available here")
        return offline_factory()
    check_endpoint(settings)
    return OpenAIBackend(settings)
