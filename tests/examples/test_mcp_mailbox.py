"""The shipped MCP server's mailbox: seeded facts where they should be, folders that persist in a file,
and the offline scenarios the MCP-RL example trains on."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="needs the `mcp` extra: pip install -e '.[mcp]'")

from art.examples.mcp_rl.mailbox import Mailbox, build_mailbox
from art.examples.mcp_rl.scenarios import offline_scenarios


def test_every_fact_is_in_its_email_and_searchable() -> None:
    emails, facts = build_mailbox(0)
    assert build_mailbox(0) == (emails, facts) and build_mailbox(1) != (emails, facts)
    assert [e.id for e in emails] == list(range(1, 31)) and len(facts) == 20
    mailbox = Mailbox(0)
    try:
        for fact in facts:
            email = emails[fact.email_id - 1]
            assert fact.answer in email.body or fact.answer in email.sender
            hits = mailbox.search(fact.question, limit=5)
            assert fact.email_id in [h["id"] for h in hits], fact
    finally:
        mailbox.close()


def test_folders_change_and_persist_in_a_file(tmp_path: Path) -> None:
    path = str(tmp_path / "mailbox.sqlite")
    first = Mailbox(0, path)
    assert first.folder_counts() == {"inbox": 30, "archive": 0, "important": 0, "trash": 0}
    first.move(4, "important")
    assert first.list_folder("important", 10)[0]["id"] == 4
    first.close()
    again = Mailbox(0, path)  # the file already holds the mailbox: nothing is inserted twice
    try:
        assert again.folder_counts() == {"inbox": 29, "archive": 0, "important": 1, "trash": 0}
        assert again.read(4)["folder"] == "important" and again.read(99) is None  # type: ignore[index]
    finally:
        again.close()


def test_offline_scenarios_are_distinct_and_seeded() -> None:
    scenarios = offline_scenarios(0)
    tasks = [s.task for s in scenarios]
    assert len(tasks) == len(set(tasks)) == 51
    assert offline_scenarios(0).to_dicts() == scenarios.to_dicts()
    assert set(scenarios.get_difficulty_distribution()) == {1, 2, 3, 4}


def test_boolean_flags_of_the_mcp_rl_example_read_false_as_false() -> None:
    from art.examples.mcp_rl.train import _flag_bool

    assert _flag_bool("false") is False and _flag_bool("No") is False and _flag_bool("0") is False
    assert _flag_bool("true") is True and _flag_bool("1") is True
    with pytest.raises(ValueError, match="expected true or false"):
        _flag_bool("maybe")
