"""The agents' only way to the workspace tools: an MCP client session.

Agents never import :mod:`autofe.tools`; they call the tools server by name, the way any other
agent would (``autofe mcp``). ``McpToolbox`` wraps an open SDK client (in-memory for a local
run, or stdio / HTTP) and turns a tool error into :class:`~autofe.errors.AgentError`.
"""

from __future__ import annotations

from typing import Any, Protocol

from autofe.errors import AgentError


class Toolbox(Protocol):
    """Something that calls a named tool with JSON arguments and returns its JSON result."""

    async def call(self, tool: str, args: dict[str, Any]) -> dict[str, Any]: ...


class McpToolbox:
    """A :class:`Toolbox` over an open ``mcp.client.Client``."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.calls = 0

    async def call(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        """Call ``tool``; its structured result, or ``AgentError`` with the tool's message."""
        self.calls += 1
        result = await self._client.call_tool(tool, args)
        if result.is_error:
            text = " ".join(getattr(block, "text", "") for block in result.content)
            raise AgentError(f"tool {tool} failed: {text.strip() or 'no message'}")
        content = result.structured_content
        if not isinstance(content, dict):
            raise AgentError(f"tool {tool} returned no structured result")
        return content
