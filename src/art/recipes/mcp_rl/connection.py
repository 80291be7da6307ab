"""Reaching an MCP server with the official SDK: over stdio (a command we start) or streamable HTTP (a URL).

`McpServer` says where the server is and how long each request may take; `connect(server)` opens an
`mcp.Client` session with the handshake done, and turns every way of failing to get there (the command
does not exist, the process exits, the URL refuses, nothing answers in time) into an `McpServerError`
that names the server and the cause. Every request through the session has the server's `timeout`
(the handshake, process start included, has `connect_timeout`), so a hanging server costs at most that
long per request.
`list_tools_and_resources(server)` is the discovery step of MCP-RL.
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
from pydantic import BaseModel, ConfigDict, Field, model_validator

from art.recipes.mcp_rl.types import MCPResource, MCPTool

try:
    import mcp
    from mcp import StdioServerParameters
    from mcp.shared.exceptions import MCPError
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "art.mcp needs the official MCP SDK: pip install 'agent-reinforcement-trainer[mcp]'"
    ) from exc

logger = logging.getLogger("art.mcp")

CONNECTION_CLOSED = -32000
REQUEST_TIMEOUT = -32001


class McpServerError(RuntimeError):
    """The MCP server failed to start, closed the connection, or did not answer in time.

    `trajectory` holds the rollout's trajectory up to the failure when a rollout raised it.

    Example:
        try:
            trajectory = await rollout(model, scenario)
        except McpServerError as error:
            print(error, error.trajectory)
    """

    def __init__(self, message: str, *, trajectory: Any = None) -> None:
        super().__init__(message)
        self.trajectory = trajectory


class McpServer(BaseModel):
    """Where an MCP server is: a `command` (with `args`, `env`, `cwd`) started for stdio, or a `url`.

    Example:
        McpServer.stdio(sys.executable, "-m", "art.examples.mcp_rl.server")
        McpServer.http("http://127.0.0.1:8765/mcp", headers={"Authorization": "Bearer ..."})
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] | None = None
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict, repr=False)
    timeout: float = Field(
        default=30.0, gt=0, description="Seconds each request (a tool call, a listing) may take."
    )
    connect_timeout: float = Field(
        default=120.0, gt=0, description="Seconds to start the server (stdio) and complete the handshake."
    )

    @model_validator(mode="after")
    def _one_target(self) -> McpServer:
        if (self.command is None) == (self.url is None):
            raise ValueError(
                "give exactly one of command= (a server started for stdio) or url= (streamable HTTP)"
            )
        if self.command is not None and not self.command.strip():
            raise ValueError("command must not be empty")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url must start with http:// or https://, got {self.url!r}")
        return self

    @classmethod
    def stdio(
        cls,
        command: str,
        *args: str,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        timeout: float = 30.0,
        connect_timeout: float = 120.0,
    ) -> McpServer:
        """A server started as `command args...`, spoken to over its stdin/stdout."""
        return cls(
            command=command,
            args=list(args),
            env=env,
            cwd=cwd,
            timeout=timeout,
            connect_timeout=connect_timeout,
        )

    @classmethod
    def http(
        cls,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        timeout: float = 30.0,
        connect_timeout: float = 30.0,
    ) -> McpServer:
        """A running server at `url` (streamable HTTP, e.g. `http://127.0.0.1:8765/mcp`)."""
        return cls(url=url, headers=headers or {}, timeout=timeout, connect_timeout=connect_timeout)

    @classmethod
    def coerce(cls, value: McpServer | StdioServerParameters | str | dict[str, Any]) -> McpServer:
        """An `McpServer` from itself, the SDK's `StdioServerParameters`, a URL, or a dict of fields."""
        if isinstance(value, McpServer):
            return value
        if isinstance(value, StdioServerParameters):
            return cls(
                command=value.command,
                args=list(value.args),
                env=value.env,
                cwd=str(value.cwd) if value.cwd is not None else None,
            )
        if isinstance(value, str):
            return cls.http(value)
        if isinstance(value, dict):
            return cls.model_validate(value)
        raise TypeError(
            f"an MCP server is an art.mcp.McpServer, an mcp.StdioServerParameters or a URL; got {type(value).__name__}"
        )

    @property
    def label(self) -> str:
        """A short readable name for logs and errors (never the headers)."""
        if self.url is not None:
            return self.url
        return shlex.join([self.command or "", *self.args])

    def _target(self) -> Any:
        if self.command is not None:
            return StdioServerParameters(
                command=self.command, args=list(self.args), env=self.env, cwd=self.cwd
            )
        assert self.url is not None
        if not self.headers:
            return self.url
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        return streamable_http_client(self.url, http_client=httpx2.AsyncClient(headers=self.headers))


def describe_error(exc: BaseException) -> str:
    """One line about an exception, looking inside exception groups (anyio wraps transport failures)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def is_server_failure(exc: BaseException) -> bool:
    """Whether `exc` means the server is gone or unreachable (not a single slow or failed request)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, MCPError):
        return exc.code != REQUEST_TIMEOUT
    return isinstance(exc, OSError | EOFError | ConnectionError | McpServerError)


@asynccontextmanager
async def connect(server: McpServer) -> AsyncIterator[mcp.Client]:
    """An initialised `mcp.Client` session with `server`; raises McpServerError if it cannot be had.

    Example:
        async with connect(McpServer.stdio("python", "-m", "my_server")) as client:
            result = await client.call_tool("search", {"query": "x"})
    """
    # The SDK's read timeout bounds the handshake; each later request gets `server.timeout` (see `request`).
    # mode="legacy": the `initialize` handshake every MCP server accepts. The SDK's "auto" mode probes
    # `server/discover` first, and on a loaded machine a probe that times out client-side but succeeds on
    # the server leaves the connection refusing the fallback handshake (seen here: "connection is serving
    # the 2026-07-28 protocol; the initialize handshake is not accepted").
    client = mcp.Client(server._target(), read_timeout_seconds=server.connect_timeout, mode="legacy")
    try:
        await client.__aenter__()
    except Exception as exc:
        raise McpServerError(
            f"could not start or reach the MCP server {server.label}: {describe_error(exc)}. "
            + (
                "Check that the command runs on its own (it must speak MCP on stdin/stdout)."
                if server.command is not None
                else "Check that the server is running and that the URL ends with its MCP path (often /mcp)."
            )
        ) from exc
    try:
        yield client
    finally:
        try:
            await client.__aexit__(None, None, None)
        except Exception as exc:  # a crashed server can fail its own teardown; nothing to keep there
            logger.debug("closing the MCP session with %s: %s", server.label, describe_error(exc))


async def list_tools_and_resources(
    server: McpServer | StdioServerParameters | str,
) -> tuple[list[MCPTool], list[MCPResource]]:
    """Every tool and resource `server` offers (a server without resources gives an empty list).

    Example:
        tools, resources = await list_tools_and_resources(McpServer.stdio(sys.executable, "-m", "my_server"))
    """
    spec = McpServer.coerce(server)
    async with connect(spec) as client:
        tools = await _all_tools(client, spec)
        try:
            with anyio.fail_after(spec.timeout):
                listed = await client.list_resources()
            resources = [MCPResource.from_mcp(r) for r in listed.resources]
        except TimeoutError as exc:
            raise McpServerError(
                f"the MCP server {spec.label} did not list its resources within {spec.timeout:g} s"
            ) from exc
        except MCPError as exc:
            if is_server_failure(exc):
                raise McpServerError(f"the MCP server {spec.label} failed: {describe_error(exc)}") from exc
            resources = []  # the server does not offer resources
    return tools, resources


async def _all_tools(client: mcp.Client, server: McpServer) -> list[MCPTool]:
    tools: list[MCPTool] = []
    cursor: str | None = None
    try:
        while True:
            with anyio.fail_after(server.timeout):
                page = await client.list_tools(cursor=cursor)
            tools.extend(MCPTool.from_mcp(t) for t in page.tools)
            cursor = page.next_cursor
            if not cursor:
                return tools
    except (MCPError, TimeoutError) as exc:
        why = (
            f"no answer within {server.timeout:g} s" if isinstance(exc, TimeoutError) else describe_error(exc)
        )
        raise McpServerError(f"the MCP server {server.label} did not list its tools: {why}") from exc


async def discover_tools(client: mcp.Client, server: McpServer) -> list[MCPTool]:
    """The tools of an open session (every page)."""
    return await _all_tools(client, server)


def tool_schemas(tools: Sequence[MCPTool]) -> list[dict[str, Any]]:
    """OpenAI function-tool schemas for MCP tools."""
    return [t.to_tool_schema() for t in tools]
