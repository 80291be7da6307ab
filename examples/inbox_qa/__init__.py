"""Inbox QA's leftover: the mailbox vocabulary the MCP-RL example builds on (the task is examples/email_agent)."""
