"""The shipped MCP server: Sam's mailbox (SQLite, seeded, offline) served with the official MCP SDK.

    python -m art.examples.mcp_rl.server                          # stdio (what MCP-RL rollouts start)
    python -m art.examples.mcp_rl.server --transport streamable-http --port 8765   # http://127.0.0.1:8765/mcp
    python -m art.examples.mcp_rl.server --db mailbox.sqlite      # state kept in a file across runs

Tools: `search_emails(query, limit)`, `read_email(email_id)`, `list_folder(folder, limit)`,
`move_email(email_id, folder)` (changes state: later calls see the move), `folder_counts()`. Resource:
`mailbox://folders`. Bad arguments (an unknown id or folder) are tool errors (`is_error`), which a
client sees as results, not crashes.

`--fault-tools` adds two tools for tests of what a client does when a server misbehaves: `crash_server`
(the process exits at once, mid-request) and `slow_tool(seconds)` (answers only after `seconds`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from typing import Any

from art.examples.mcp_rl.mailbox import FOLDERS, Mailbox
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

INSTRUCTIONS = (
    "Sam's mailbox. Search it by keywords, read emails by id, list a folder, and move emails between the "
    f"folders {', '.join(FOLDERS)}."
)


def build_server(mailbox: Mailbox, *, fault_tools: bool = False) -> MCPServer:
    """An MCP server whose tools read and change `mailbox`."""
    server = MCPServer("mailbox", instructions=INSTRUCTIONS, log_level="WARNING")

    def check_folder(folder: str) -> str:
        name = folder.strip().lower()
        if name not in FOLDERS:
            raise ToolError(f"unknown folder {folder!r}; the folders are {', '.join(FOLDERS)}")
        return name

    @server.tool()
    def search_emails(query: str, limit: int = 5) -> str:
        """Search the mailbox by keywords (any of the words). Returns matching emails with their ids."""
        hits = mailbox.search(query, max(1, min(limit, 20)))
        return json.dumps(hits) if hits else "no emails found"

    @server.tool()
    def read_email(email_id: int) -> str:
        """Read one email in full by its id."""
        email = mailbox.read(email_id)
        if email is None:
            raise ToolError(f"no email with id {email_id}")
        return json.dumps(email)

    @server.tool()
    def list_folder(folder: str = "inbox", limit: int = 10) -> str:
        """List the newest emails of a folder (inbox, archive, important or trash)."""
        return json.dumps(mailbox.list_folder(check_folder(folder), max(1, min(limit, 50))))

    @server.tool()
    def move_email(email_id: int, folder: str) -> str:
        """Move an email to a folder (inbox, archive, important or trash)."""
        name = check_folder(folder)
        if mailbox.read(email_id) is None:
            raise ToolError(f"no email with id {email_id}")
        mailbox.move(email_id, name)
        return f"email {email_id} moved to {name}"

    @server.tool()
    def folder_counts() -> str:
        """How many emails each folder holds."""
        return json.dumps(mailbox.folder_counts())

    @server.resource("mailbox://folders", description="The folders and how many emails each holds.")
    def folders_resource() -> str:
        return json.dumps(mailbox.folder_counts())

    if fault_tools:

        @server.tool()
        def crash_server() -> str:
            """Test fault: the server process exits at once."""
            os._exit(3)

        @server.tool()
        async def slow_tool(seconds: float = 3600.0) -> str:
            """Test fault: answers only after `seconds`."""
            await asyncio.sleep(seconds)
            return f"slept {seconds} s"

    return server


def main(argv: list[str] | None = None) -> None:
    """Command-line entry (see the module docstring)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seed", type=int, default=0, help="which mailbox to build (default 0)")
    parser.add_argument("--db", default=":memory:", help="SQLite file to keep the state in (default: memory)")
    parser.add_argument("--transport", choices=("stdio", "streamable-http"), default="stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--fault-tools", action="store_true", help="add crash_server and slow_tool (tests)")
    args = parser.parse_args(argv)
    mailbox = Mailbox(args.seed, args.db)
    server = build_server(mailbox, fault_tools=args.fault_tools)
    try:
        if args.transport == "stdio":
            server.run("stdio")
        else:
            kwargs: dict[str, Any] = {"host": args.host, "port": args.port}
            server.run("streamable-http", **kwargs)
    finally:
        mailbox.close()


if __name__ == "__main__":
    main()
