"""The MCP tools server: thin wrappers over autofe's pure tool functions.

One server object per workspace (a warehouse, the folders event logs may be read from, a
feature store). Every tool but ``materialize_feature`` is annotated read-only. Every failed
call, whether refused by the input schema, refused by autofe or crashed, is an ``isError``
result whose text is ``<tool>: <reason>`` (:mod:`autofe.tools.tool_errors`), made in one place,
:meth:`AutofeServer.call_tool`. The warehouse is only ever read through the sandbox.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, InputRequiredResult, ToolAnnotations
from pydantic import AfterValidator, Field, ValidationError

from autofe.featurespec import Category, FeatureSpec, ValueType
from autofe.gates import GateContext, GateSettings, Verdict, run_gates
from autofe.sandbox.limits import SandboxLimits
from autofe.sandbox.session import Sandbox
from autofe.tools.describe_schema import SchemaDescription
from autofe.tools.describe_schema import describe_schema as _describe_schema
from autofe.tools.materialize_feature import MaterializeResult, gate_context
from autofe.tools.materialize_feature import materialize_feature as _materialize_feature
from autofe.tools.profile_script import ScriptProfile
from autofe.tools.profile_script import profile_script as _profile_script
from autofe.tools.query_metadata import MetadataPage
from autofe.tools.query_metadata import query_metadata as _query_metadata
from autofe.tools.run_readonly_sql import SqlResult
from autofe.tools.run_readonly_sql import run_readonly_sql as _run_readonly_sql
from autofe.tools.summarize_event_log import EventLogSummary, summarize_event_log
from autofe.tools.tool_errors import (
    failure,
    invalid_arguments,
    is_refusal,
    refuse_nul,
    unknown_arguments,
    unknown_tool,
)

log = logging.getLogger(__name__)

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True)


@dataclass(frozen=True)
class ServerConfig:
    """What one server serves: a warehouse, readable log folders, a feature store."""

    db: Path
    roots: tuple[Path, ...] = ()
    store: Path | None = None
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    gates: GateSettings = field(default_factory=GateSettings)
    """Thresholds and budgets of the gates ``materialize_feature`` and ``check_feature`` run
    (their sandbox limits are always ``limits``)."""

    @property
    def feature_store(self) -> Path:
        return self.store or self.db.with_name(self.db.stem + ".features.duckdb")


class Workspace:
    """The server's open resources, made on first use and closed with the server."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self._sandbox: Sandbox | None = None
        self._gates: GateContext | None = None

    def sandbox(self) -> Sandbox:
        if self._sandbox is None:
            self._sandbox = Sandbox.open(self.config.db, self.config.limits)
        return self._sandbox

    def gates(self) -> GateContext:
        # From the open sandbox: reopening the file with other settings would be refused.
        if self._gates is None:
            self._gates = gate_context(self.config.db, self.sandbox(), self.config.gates)
        return self._gates

    def close(self) -> None:
        if self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None


class AutofeServer(MCPServer[Any]):
    """The SDK's server, with every tool error saying why.

    The SDK validates arguments before a tool runs and reports a crash as a bare ``Error
    executing tool <name>``, so no decorator on the tool functions can see every failure; this
    override sees them all, after the SDK has kept the original as ``__cause__``.
    """

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        """Call a tool; any failure is a ``ToolError`` whose message names the tool and why."""
        tools = {tool.name: tool for tool in await self.list_tools()}
        if name not in tools:
            raise ToolError(unknown_tool(name, tools))
        accepted = tools[name].input_schema.get("properties", {})
        if (extra := unknown_arguments(name, arguments, accepted)) is not None:
            raise ToolError(extra)
        try:
            return await super().call_tool(name, arguments, context)
        except MCPError:
            raise
        except Exception as exc:
            message, origin = _explained(name, arguments, exc)
            raise ToolError(message) from origin


def _explained(name: str, arguments: dict[str, Any], exc: Exception) -> tuple[str, BaseException]:
    """The reasoned message for what ``MCPServer.call_tool`` raised, and what to chain it to.

    A rejected argument stays chained to its ``ValidationError`` so the SDK logs it by field
    name only, as it does its own; a crash is logged here with its traceback (it is a bug).
    """
    crashed = isinstance(exc, UnexpectedToolError)
    cause = exc.__cause__ if isinstance(exc, ToolError) and exc.__cause__ is not None else exc
    if isinstance(cause, ValidationError) and not crashed:
        return invalid_arguments(name, cause), cause
    message = failure(name, arguments, cause)
    if not is_refusal(cause):
        log.error("%s", message, exc_info=cause)
    return message, exc


def _spec(
    name: str, sql: str, category: Category, value_type: ValueType, rationale: str
) -> FeatureSpec:
    return FeatureSpec(
        name=name, sql=sql, category=category, value_type=value_type, rationale=rationale
    )


MAX_NAME = 80
"""A feature name's length limit: the one ``FeatureSpec`` enforces, checked before it runs."""
MAX_KEY = 1000
"""An id, table name or status: far longer than any real one, short enough to quote back."""
MAX_PATH = 4096
"""Linux's PATH_MAX: no longer path can be opened."""
MAX_SQL = 100_000
MAX_SCRIPT = 1_000_000
"""A whole SQL or PySpark script to profile (a notebook export, not one statement)."""

Key = Annotated[str, Field(max_length=MAX_KEY), AfterValidator(refuse_nul)]
Name = Annotated[
    str,
    Field(
        description="snake_case feature name",
        pattern=r"^[a-z][a-z0-9_]*$",
        min_length=1,
        max_length=MAX_NAME,
    ),
]
FeatureSql = Annotated[
    str,
    Field(
        description="DuckDB SELECT returning (run_id, value): one row per run, computed only "
        "from what was known before that run's submit_time",
        min_length=1,
        max_length=MAX_SQL,
    ),
]
CategoryArg = Annotated[Category, Field(description="feature category")]
ValueTypeArg = Annotated[ValueType, Field(description="SQL type of value")]
Rationale = Annotated[str, Field(description="why it should predict runtime", max_length=2000)]
LogPath = Annotated[
    str,
    Field(description="event log file or rolled-log folder", min_length=1, max_length=MAX_PATH),
    AfterValidator(refuse_nul),
]
Sql = Annotated[
    str,
    Field(description="one DuckDB SELECT over warehouse tables", min_length=1, max_length=MAX_SQL),
]
Script = Annotated[
    str, Field(description="or this SQL / PySpark text", min_length=1, max_length=MAX_SCRIPT)
]


def _register_read_tools(server: MCPServer[Any], ws: Workspace) -> None:
    @server.tool(annotations=READ_ONLY)
    def describe_schema(
        table: Annotated[Key | None, Field(description="one table, or all when omitted")] = None,
    ) -> SchemaDescription:
        """Tables and columns of the warehouse with availability tags.

        known_at_submit columns describe a run itself; post_execution columns may only be used
        from other runs that ended before the target run's submit_time.
        """
        return _describe_schema(ws.gates().catalog, table)

    @server.tool(annotations=READ_ONLY)
    def parse_event_log(
        path: LogPath,
        max_items: Annotated[int, Field(ge=1, le=200, description="stages/SQL listed")] = 20,
    ) -> EventLogSummary:
        """Summarise one Spark event log: application, jobs, stages, SQL, task metrics."""
        return summarize_event_log(path, ws.config.roots, max_items)


def _register_query_tools(server: MCPServer[Any], ws: Workspace) -> None:
    @server.tool(annotations=READ_ONLY)
    def query_metadata(
        entity: Annotated[
            Literal["jobs", "runs", "cluster_configs", "table_stats"],
            Field(description="what to list"),
        ],
        job_id: Key | None = None,
        run_id: Key | None = None,
        status: Key | None = None,
        submitted_after: datetime | None = None,
        submitted_before: datetime | None = None,
        table_name: Key | None = None,
        as_of: Annotated[
            datetime | None, Field(description="table_stats: latest snapshot at this time")
        ] = None,
        limit: Annotated[int, Field(ge=1, le=500)] = 50,
        offset: Annotated[int, Field(ge=0, le=1_000_000_000)] = 0,
    ) -> MetadataPage:
        """Jobs, runs (with their cluster config), cluster configs, or table stats; paged."""
        return _query_metadata(
            ws.sandbox(),
            entity,
            job_id=job_id,
            run_id=run_id,
            status=status,
            submitted_after=submitted_after,
            submitted_before=submitted_before,
            table_name=table_name,
            as_of=as_of,
            limit=limit,
            offset=offset,
        )

    @server.tool(annotations=READ_ONLY)
    def run_readonly_sql(
        sql: Sql,
        limit: Annotated[int, Field(ge=1, le=1000)] = 100,
    ) -> SqlResult:
        """Run one read-only query in the sandbox (no files, no settings, time/row limits)."""
        return _run_readonly_sql(ws.sandbox(), sql, limit)

    @server.tool(annotations=READ_ONLY)
    def profile_script(
        job_id: Annotated[Key | None, Field(description="profile this job's script")] = None,
        text: Script | None = None,
    ) -> ScriptProfile:
        """Facts from a SQL or PySpark script: tables, joins and keys, filters, date ranges,
        aggregations, windows, UDFs."""
        return _profile_script(_script_text(ws, job_id, text))


def _script_text(ws: Workspace, job_id: str | None, text: str | None) -> str:
    if (job_id is None) == (text is None):
        raise ToolError("give exactly one of job_id or text")
    if text is not None:
        return text
    page = _query_metadata(ws.sandbox(), "jobs", job_id=job_id, limit=1)
    if not page.rows:
        raise ToolError(f"no job {job_id!r}: list jobs with query_metadata(entity='jobs')")
    script = page.rows[0].get("script_text")
    if not script:
        raise ToolError(f"job {job_id!r} has no script text in the warehouse")
    return str(script)


def _register_feature_tools(server: MCPServer[Any], ws: Workspace) -> None:
    @server.tool(annotations=READ_ONLY)
    def check_feature(
        name: Name,
        sql: FeatureSql,
        category: CategoryArg,
        value_type: ValueTypeArg = "DOUBLE",
        rationale: Rationale = "",
    ) -> dict[str, Any]:
        """Run the completeness and leakage gates on a feature; returns the verdict."""
        verdict: Verdict = run_gates(_spec(name, sql, category, value_type, rationale), ws.gates())
        return verdict.as_dict()

    @server.tool(annotations=WRITES)
    def materialize_feature(
        name: Name,
        sql: FeatureSql,
        category: CategoryArg,
        value_type: ValueTypeArg = "DOUBLE",
        rationale: Rationale = "",
    ) -> MaterializeResult:
        """Gate a feature, then compute its values for every run into the feature store."""
        spec = _spec(name, sql, category, value_type, rationale)
        return _materialize_feature(spec, ws.gates(), ws.sandbox(), ws.config.feature_store)


def build_server(config: ServerConfig) -> AutofeServer:
    """The autofe MCP server for one warehouse."""
    ws = Workspace(config)

    @asynccontextmanager
    async def lifespan(_: MCPServer[Any]) -> AsyncIterator[None]:
        try:
            yield None
        finally:
            ws.close()

    server = AutofeServer(
        name="autofe",
        instructions=INSTRUCTIONS,
        lifespan=lifespan,
    )
    _register_read_tools(server, ws)
    _register_query_tools(server, ws)
    _register_feature_tools(server, ws)
    return server


INSTRUCTIONS = """autofe tools over one Spark / Databricks job-history warehouse.
Start with describe_schema: every column is tagged known_at_submit or post_execution. A feature
is a DuckDB SELECT returning (run_id, value) for every run; post_execution facts may only come
from other runs whose end_time < the target run's submit_time. check_feature runs the gates;
materialize_feature stores the values of an accepted feature."""
