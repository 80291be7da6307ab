"""MCP-RL on a shipped MCP server: a mailbox in SQLite served with the official MCP SDK."""
