"""The small seeded mailbox vocabulary of the MCP-RL example (examples/mcp_rl/mailbox.py builds on it).

This was the environment of the inbox QA task, which the email agent (examples/email_agent: thousands of
emails over several mailboxes, real tools with filters, rewards and RULER, SFT on a scripted expert)
replaced. What is left is what the MCP server's mailbox uses, unchanged so that its mailbox stays the
same: the five fact kinds and their entities, `_fact_email` (one fact email: sender, subject, body,
answer), `QUESTIONS`, everyday `FILLER`, `Email`, and `InboxDB` (SQLite with an FTS5 index, porter
stemming, over sender, subject and body; `search` ORs the query's words, best BM25 match first).
"""

from __future__ import annotations

import random
import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

KINDS = ("order", "flight", "meeting", "wifi", "sender")


@dataclass(frozen=True)
class Email:
    """One email; `id` is its position in the inbox, oldest first, from 1."""

    id: int
    sender: str
    subject: str
    date: str
    body: str

    def as_dict(self) -> dict[str, Any]:
        """The email as `read_email` returns it."""
        return {
            "id": self.id,
            "from": self.sender,
            "subject": self.subject,
            "date": self.date,
            "body": self.body,
        }


# ---------------------------------------------------------------- the generator

FIRST_NAMES = ["Maria", "James", "Aisha", "Chen", "Lucas", "Priya", "Olga", "Tom", "Fatima", "Diego",
               "Hana", "Peter", "Zoe", "Ravi", "Elena", "Kofi"]  # fmt: skip
LAST_NAMES = ["Lopez", "Smith", "Khan", "Wei", "Martin", "Patel", "Ivanova", "Brown", "Haddad", "Garcia",
              "Sato", "Novak", "Evans", "Rao", "Rossi", "Mensah"]  # fmt: skip
SHOPS = ["Northwind", "Bluebird Goods", "Acme Outlet", "Pinecone Market", "Harbor Supply"]
WORDS = ["maple", "river", "stone", "cloud", "amber", "cedar", "tiger", "lemon", "orbit", "pearl"]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]

# (entity as the email names it, alias a question may use instead: never a word of the email)
ENTITIES: dict[str, list[tuple[str, str]]] = {
    "order": [("espresso machine", "coffee maker"), ("running shoes", "sneakers"), ("desk lamp", "reading light"),
              ("backpack", "rucksack"), ("blender", "smoothie maker"), ("yoga mat", "exercise mat"),
              ("headphones", "earphones"), ("winter jacket", "warm coat")],
    "flight": [("Paris", "the French capital"), ("Tokyo", "the Japanese capital"), ("Madrid", "the Spanish capital"),
               ("Rome", "the Italian capital"), ("Berlin", "the German capital"), ("Lisbon", "the Portuguese capital"),
               ("Cairo", "the Egyptian capital"), ("Oslo", "the Norwegian capital")],
    "meeting": [("budget review", "spending plan"), ("product launch", "new release"), ("hiring plan", "recruiting"),
                ("office move", "relocation"), ("security audit", "safety check"), ("customer survey", "client feedback"),
                ("holiday party", "year-end celebration"), ("website redesign", "new homepage")],
    "wifi": [("lake cabin", "cottage by the water"), ("beach house", "place by the sea"),
             ("ski chalet", "mountain lodge"), ("city loft", "apartment downtown"), ("farmhouse", "country home"),
             ("boathouse", "place at the marina")],
    "sender": [("quarterly report", "three-month numbers"), ("parking permit", "car spot"), ("team lunch", "group meal"),
               ("conference tickets", "event passes"), ("printer repair", "broken copier"), ("new laptop", "replacement computer")],
}  # fmt: skip

FILLER: list[tuple[str, str, str]] = [
    ("Daily Brief <news@dailybrief.example>", "Your weekly digest", "Top stories this week: {w1} prices, a {w2} festival and local elections."),
    ("PowerCo <billing@powerco.example>", "Your statement is ready", "Your monthly electricity statement is ready. No action is needed."),
    ("{person}", "Photos from the weekend", "Hi Sam,\n\nHere are the photos from the {w1} hike. What a great day!\n\n{first}"),
    ("Smile Dental <clinic@smiledental.example>", "Appointment reminder", "This is a reminder of your check-up on {date}. Reply to reschedule."),
    ("{person}", "Book club", "Hi all,\n\nThis month we read \"The {w1} {w2}\". See you on {weekday}!\n\n{first}"),
    ("Accounts <no-reply@accounts.example>", "Password changed", "The password of your account was changed. If this was not you, contact support."),
    ("City Gym <hello@citygym.example>", "New classes this month", "We added {w1} yoga and {w2} spin classes. Book in the app."),
    ("{person}", "Recipe you asked for", "Hi Sam,\n\nThe secret is {w1} zest and a pinch of salt. Enjoy!\n\n{first}"),
]  # fmt: skip


def _person(rng: random.Random) -> tuple[str, str]:
    first, last = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
    return f"{first} {last}", f"{first} {last} <{first.lower()}.{last.lower()}@example.com>"


def _date(rng: random.Random) -> str:
    return f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"


def _time(rng: random.Random) -> str:
    return f"{rng.randint(8, 18)}:{rng.choice(['00', '15', '30', '45'])}"


def _fact_email(kind: str, entity: str, rng: random.Random) -> tuple[str, str, str, str]:
    """(sender, subject, body, answer) for one fact email of `kind` about `entity`."""
    letters = "ABCDEFGHJKLMNPRSTUVWXYZ"
    if kind == "order":
        shop = rng.choice(SHOPS)
        code = rng.choice(letters) + rng.choice(letters) + str(rng.randint(100000, 999999))
        slug = shop.lower().replace(" ", "")
        body = (f"Hi Sam,\n\nGood news: your {entity} from {shop} is on its way.\nTracking number: {code}\n"
                f"Expected delivery: {_date(rng)}.\n\nThanks for shopping with us!")  # fmt: skip
        return f"{shop} <orders@{slug}.example>", f"Your {entity} has shipped", body, code
    if kind == "flight":
        number = f"SW{rng.randint(100, 9999)}"
        body = (f"Dear Sam,\n\nYour flight to {entity} is confirmed.\nFlight number: {number}\n"
                f"Departure: {_date(rng)} at {_time(rng)}\n\nHave a pleasant trip.")  # fmt: skip
        return "SkyWays <bookings@skyways.example>", f"Booking confirmed: flight to {entity}", body, number
    if kind == "meeting":
        (name, address), room = _person(rng), rng.choice(letters) + str(rng.randint(100, 499))
        body = (f"Hi Sam,\n\nLet's meet on {rng.choice(WEEKDAYS)} at {_time(rng)} to discuss the {entity}. "
                f"We booked room {room}.\n\nBest,\n{name.split()[0]}")  # fmt: skip
        return address, f"Meeting: {entity}", body, room
    if kind == "wifi":
        (name, address), password = (
            _person(rng),
            f"{rng.choice(WORDS)}-{rng.choice(WORDS)}-{rng.randint(10, 99)}",
        )
        body = (f"Hey Sam,\n\nLooking forward to your stay at the {entity}! The wifi password is {password}.\n\n"
                f"Cheers,\n{name.split()[0]}")  # fmt: skip
        return address, f"Wifi at the {entity}", body, password
    if kind == "sender":
        name, address = _person(rng)
        body = f"Hi Sam,\n\nA quick note about the {entity}: it is all sorted, details to follow.\n\n{name.split()[0]}"
        return address, f"About the {entity}", body, name
    raise ValueError(f"unknown kind {kind!r}")


QUESTIONS: dict[str, Callable[[str], str]] = {
    "order": lambda e: f"What is the tracking number for my {e}?",
    "flight": lambda e: f"What is the flight number of my flight to {e}?",
    "meeting": lambda e: f"Which room is the meeting about the {e} in?",
    "wifi": lambda e: f"What is the wifi password at the {e}?",
    "sender": lambda e: f"Who sent me the email about the {e}?",
}


_STOPWORDS = frozenset(
    {"a", "an", "and", "are", "at", "about", "for", "from", "i", "in", "is", "it", "me", "my", "of", "on", "or",
     "the", "to", "was", "what", "when", "where", "which", "who", "why", "with", "you", "your", "email", "emails"}
)  # fmt: skip


class InboxDB:
    """An inbox in SQLite with an FTS5 index; `path=":memory:"` (default) keeps it in memory."""

    def __init__(self, emails: tuple[Email, ...] | list[Email], path: str = ":memory:") -> None:
        self.conn = sqlite3.connect(path, check_same_thread=False)
        self.conn.executescript(
            """
            CREATE TABLE IF NOT EXISTS emails (
                id INTEGER PRIMARY KEY, sender TEXT, subject TEXT, date TEXT, body TEXT);
            CREATE VIRTUAL TABLE IF NOT EXISTS emails_fts USING fts5(
                sender, subject, body, content='emails', content_rowid='id', tokenize='porter unicode61');
            """
        )
        with self.conn:
            self.conn.executemany(
                "INSERT INTO emails (id, sender, subject, date, body) VALUES (?, ?, ?, ?, ?)",
                [(e.id, e.sender, e.subject, e.date, e.body) for e in emails],
            )
            self.conn.execute("INSERT INTO emails_fts (emails_fts) VALUES ('rebuild')")

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()

    def search(self, query: str, limit: int = 5, snippets: bool = True) -> list[dict[str, Any]]:
        """Emails matching any word of `query` (stop words dropped), best BM25 match first."""
        words = [w for w in re.findall(r"[a-z0-9]+", query.lower()) if w not in _STOPWORDS]
        if not words:
            return []
        match = " OR ".join(f'"{w}"' for w in dict.fromkeys(words))
        rows = self.conn.execute(
            "SELECT e.id, e.sender, e.subject, e.date, snippet(emails_fts, 2, '', '', '...', 24) "
            "FROM emails_fts JOIN emails e ON e.id = emails_fts.rowid "
            "WHERE emails_fts MATCH ? ORDER BY bm25(emails_fts), e.id LIMIT ?",
            (match, limit),
        ).fetchall()
        results = []
        for id_, sender, subject, date, snippet in rows:
            row: dict[str, Any] = {"id": id_, "from": sender, "subject": subject, "date": date}
            if snippets:
                row["snippet"] = snippet
            results.append(row)
        return results

    def read(self, email_id: int) -> Email | None:
        """The email with this id, or None."""
        row = self.conn.execute(
            "SELECT id, sender, subject, date, body FROM emails WHERE id = ?", (email_id,)
        ).fetchone()
        return Email(*row) if row else None
