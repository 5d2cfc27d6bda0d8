"""Calling the MCP tools server in-process, as the tools' tests do (the SDK's in-memory client)."""

from __future__ import annotations

from typing import Any

from mcp.client import Client
from mcp_types import CallToolResult

from autofe.tools.server import ServerConfig, build_server


async def call(config: ServerConfig, tool: str, args: dict[str, Any]) -> CallToolResult:
    """One tool call on a fresh server over ``config``."""
    async with Client(build_server(config)) as client:
        return await client.call_tool(tool, args)


def text(result: CallToolResult) -> str:
    """The result's text blocks joined, as a host shows them."""
    return " ".join(getattr(block, "text", "") for block in result.content)
