"""Inbox QA: answer a question about a small synthetic inbox with search/read/answer tools (SQLite FTS5)."""
