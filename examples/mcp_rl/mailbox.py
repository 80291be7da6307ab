"""The mailbox behind the shipped MCP server: seeded emails in SQLite, with folders and ground truth.

`build_mailbox(seed)` writes, from nothing but the seed, one fact email for each of a few entities of
every kind of the inbox task (an order's tracking number, a flight number, a meeting room, a wifi
password, who wrote about something) plus everyday filler, and returns them with the facts (question,
answer) they hold. `Mailbox` stores them in SQLite (in memory, or a file that persists between runs)
with a full-text index (the inbox task's `InboxDB`) and a folder per email ("inbox" at first), which the
server's tools read and change.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from art.examples.inbox_qa.env import (
    ENTITIES,
    FILLER,
    KINDS,
    QUESTIONS,
    WEEKDAYS,
    WORDS,
    Email,
    InboxDB,
    _date,
    _fact_email,
    _person,
)

FOLDERS = ("inbox", "archive", "important", "trash")
ENTITIES_PER_KIND = 4


@dataclass(frozen=True)
class Fact:
    """A question one email answers: `kind`, the entity it is about, the answer and the email's id."""

    kind: str
    entity: str
    question: str
    answer: str
    email_id: int


def build_mailbox(seed: int = 0, num_filler: int = 10) -> tuple[list[Email], list[Fact]]:
    """The emails (ids 1.., oldest first) and the facts they hold; the same seed gives the same mailbox."""
    rng = random.Random(f"mailbox:{seed}")
    drafts: list[tuple[str, str, str, tuple[str, str, str] | None]] = []
    for kind in KINDS:
        for entity, _alias in rng.sample(ENTITIES[kind], ENTITIES_PER_KIND):
            sender, subject, body, answer = _fact_email(kind, entity, rng)
            drafts.append((sender, subject, body, (kind, entity, answer)))
    for _ in range(num_filler):
        sender, subject, body = rng.choice(FILLER)
        name, address = _person(rng)
        fill = {
            "person": address,
            "first": name.split()[0],
            "w1": rng.choice(WORDS),
            "w2": rng.choice(WORDS),
            "date": _date(rng),
            "weekday": rng.choice(WEEKDAYS),
        }
        drafts.append((sender.format(**fill), subject, body.format(**fill), None))
    rng.shuffle(drafts)
    dates = sorted(_date(rng) for _ in drafts)
    emails: list[Email] = []
    facts: list[Fact] = []
    for k, (sender, subject, body, fact) in enumerate(drafts):
        emails.append(Email(k + 1, sender, subject, dates[k], body))
        if fact is not None:
            kind, entity, answer = fact
            facts.append(Fact(kind, entity, QUESTIONS[kind](entity), answer, k + 1))
    return emails, facts


class Mailbox:
    """The mailbox in SQLite: full-text search, reading, folders. `path=":memory:"` keeps it in memory."""

    def __init__(self, seed: int = 0, path: str = ":memory:") -> None:
        self.seed = seed
        self.emails, self.facts = build_mailbox(seed)
        self.db = InboxDB([], path)  # the schema; filled below unless the file already holds the mailbox
        conn = self.db.conn
        conn.execute(
            "CREATE TABLE IF NOT EXISTS folders (email_id INTEGER PRIMARY KEY, folder TEXT NOT NULL)"
        )
        if conn.execute("SELECT COUNT(*) FROM emails").fetchone()[0] == 0:
            with conn:
                conn.executemany(
                    "INSERT INTO emails (id, sender, subject, date, body) VALUES (?, ?, ?, ?, ?)",
                    [(e.id, e.sender, e.subject, e.date, e.body) for e in self.emails],
                )
                conn.execute("INSERT INTO emails_fts (emails_fts) VALUES ('rebuild')")
                conn.executemany(
                    "INSERT INTO folders (email_id, folder) VALUES (?, 'inbox')",
                    [(e.id,) for e in self.emails],
                )

    def close(self) -> None:
        """Close the database."""
        self.db.close()

    def header(self, email: Email) -> dict[str, Any]:
        """id, from, subject, date and folder of an email."""
        return {
            "id": email.id,
            "from": email.sender,
            "subject": email.subject,
            "date": email.date,
            "folder": self.folder(email.id),
        }

    def folder(self, email_id: int) -> str:
        """The folder an email is in."""
        row = self.db.conn.execute("SELECT folder FROM folders WHERE email_id = ?", (email_id,)).fetchone()
        return str(row[0]) if row else "inbox"

    def search(self, query: str, limit: int) -> list[dict[str, Any]]:
        """Emails matching any word of `query`, best first, with a snippet and their folder."""
        hits = self.db.search(query, limit, snippets=True)
        return [{**hit, "folder": self.folder(int(hit["id"]))} for hit in hits]

    def read(self, email_id: int) -> dict[str, Any] | None:
        """The whole email, or None."""
        email = self.db.read(email_id)
        return None if email is None else {**email.as_dict(), "folder": self.folder(email_id)}

    def list_folder(self, folder: str, limit: int) -> list[dict[str, Any]]:
        """The newest `limit` emails of a folder."""
        rows = self.db.conn.execute(
            "SELECT e.id FROM emails e JOIN folders f ON f.email_id = e.id WHERE f.folder = ? "
            "ORDER BY e.date DESC, e.id DESC LIMIT ?",
            (folder, limit),
        ).fetchall()
        return [self.header(self.db.read(int(r[0]))) for r in rows]

    def move(self, email_id: int, folder: str) -> None:
        """Put an email into a folder (it must exist)."""
        with self.db.conn:
            self.db.conn.execute("UPDATE folders SET folder = ? WHERE email_id = ?", (folder, email_id))

    def folder_counts(self) -> dict[str, int]:
        """How many emails each folder holds."""
        counts = dict.fromkeys(FOLDERS, 0)
        for folder, n in self.db.conn.execute("SELECT folder, COUNT(*) FROM folders GROUP BY folder"):
            counts[str(folder)] = int(n)
        return counts
