"""A synthetic inbox, questions with ground-truth answers, and the tools an agent uses to answer them.

`make_inbox(seed, config)` builds, from nothing but the seed, a small inbox of emails (sender, subject,
date, body) and one question whose answer sits in exactly one of them (the *target*). `InboxConfig`
sets the difficulty:

- `num_emails`: inbox size; the rest beyond target and distractors is unrelated filler;
- `num_distractors`: emails of the same kind as the target with another entity and another answer
  (another order, another flight...), so an agent that reads the wrong one answers wrongly;
- `keyword_in_question`: True names the entity exactly as the email does ("my espresso machine"); False
  uses an alias the email never contains ("my coffee maker"), so keyword search alone does not find it;
- `snippet_in_search`: search results show a snippet of the body (often holding the answer) or only
  id/from/subject/date, which forces a `read_email`;
- `kinds`: which question kinds to draw from (order, flight, meeting, wifi, sender);
- `max_turns`, `partial_credit`, `accept_text_answer`, `few_shot`, `prefill_search`: scaffolding and
  scoring used by the rollout (see rollout.py).

`InboxDB` stores an inbox in SQLite (in memory by default) with an FTS5 index (porter stemming) over
sender, subject and body. The tools, as OpenAI function schemas in `TOOLS`:

- `search_emails(query)`: up to `max_results` emails ranked by BM25; the query's words are ORed;
- `read_email(id)`: one whole email;
- `answer(text)`: the final answer; ends the episode.

`is_correct(answer, question)`: the normalised (lower-case, alphanumerics only) ground truth occurs in
the normalised answer, no distractor's answer does (no hedging by listing every candidate), and the
answer is at most 200 characters.
"""

from __future__ import annotations

import json
import random
import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

KINDS = ("order", "flight", "meeting", "wifi", "sender")
TRAIN_SEED_START = 0
VAL_SEED_START = 1_000_000
MAX_ANSWER_CHARS = 200


@dataclass(frozen=True)
class InboxConfig:
    """Difficulty and scaffolding of the task; the defaults are the "easy" level (see `preset`).

    The defaults are tuned for the embedded 135M model: it never made a valid tool call on its own in
    any measurement, so the easy level makes the first search for it and accepts a plain-text answer.
    Measured (benchmarks/base_success.py, held-out questions): correct 60% greedy, 27% at temperature
    1, and 3-4 of 6 GRPO groups of 8 have reward variance. At medium and hard it scores 0%.
    """

    num_emails: int = 4
    num_distractors: int = 0
    keyword_in_question: bool = True
    snippet_in_search: bool = True
    kinds: tuple[str, ...] = KINDS
    max_results: int = 3
    max_turns: int = 4
    partial_credit: bool = True
    accept_text_answer: bool = True
    few_shot: bool = True
    prefill_search: bool = True

    def __post_init__(self) -> None:
        unknown = set(self.kinds) - set(KINDS)
        if unknown or not self.kinds:
            raise ValueError(f"kinds must be a non-empty subset of {KINDS}, got {self.kinds}")
        if not 0 <= self.num_distractors <= 4:
            raise ValueError("num_distractors must be between 0 and 4")
        if self.num_emails < 1 + self.num_distractors:
            raise ValueError("num_emails must leave room for the target and the distractors")
        if self.max_turns < 1 or self.max_results < 1:
            raise ValueError("max_turns and max_results must be at least 1")

    @classmethod
    def preset(cls, level: str) -> InboxConfig:
        """A named difficulty level: "easy" (the defaults), "medium" or "hard".

        - easy: 4 emails, no distractor, the first search made for the model, plain-text answers count;
        - medium: 8 emails, 1 distractor, the model makes every tool call itself and must call `answer`;
        - hard: 16 emails, 2 distractors, aliases instead of keywords, no snippets (it must read),
          no worked example, no partial credit, 8 turns.

        SmolLM2-135M base success: easy 60% greedy / 27% sampled; medium 0% / 0% (one valid tool call
        in 16 sampled episodes); hard 0% / 0%. Medium and hard are for larger models or for a curriculum.
        """
        if level == "easy":
            return cls()
        if level == "medium":
            return cls(
                num_emails=8, num_distractors=1, max_results=5, max_turns=5,
                prefill_search=False, accept_text_answer=False,
            )  # fmt: skip
        if level == "hard":
            return cls(
                num_emails=16, num_distractors=2, keyword_in_question=False, snippet_in_search=False,
                max_results=5, max_turns=8, prefill_search=False, accept_text_answer=False, few_shot=False,
                partial_credit=False,
            )  # fmt: skip
        raise ValueError(f"unknown level {level!r}; use easy, medium or hard")


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


@dataclass(frozen=True)
class Question:
    """A question, its ground-truth answer, and where the answer lives."""

    text: str
    answer: str
    kind: str
    target_id: int
    distractor_answers: tuple[str, ...] = ()


@dataclass(frozen=True)
class Inbox:
    """A generated inbox and its question."""

    emails: tuple[Email, ...]
    question: Question


@dataclass(frozen=True)
class InboxScenario:
    """One question: the seed fixes the inbox and the question; `split` is "train" or "val"."""

    seed: int
    split: str = "train"


def train_scenarios(n: int, start: int = 0) -> list[InboxScenario]:
    """`n` training questions (seeds start, start+1, ...), disjoint from the validation seeds."""
    if start < 0 or TRAIN_SEED_START + start + n > VAL_SEED_START:
        raise ValueError(f"training seeds must stay below {VAL_SEED_START}")
    return [InboxScenario(TRAIN_SEED_START + start + i, "train") for i in range(n)]


def val_scenarios(n: int) -> list[InboxScenario]:
    """`n` held-out questions (seeds VAL_SEED_START, ...)."""
    return [InboxScenario(VAL_SEED_START + i, "val") for i in range(n)]


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


def make_inbox(seed: int, config: InboxConfig | None = None) -> Inbox:
    """The inbox and question for `seed` (the same seed and config always give the same inbox)."""
    config = config or InboxConfig()
    rng = random.Random(seed)
    kind = rng.choice(config.kinds)
    entities = rng.sample(ENTITIES[kind], 1 + config.num_distractors)
    drafts: list[tuple[str, str, str]] = []  # (sender, subject, body); index 0 is the target
    answers: list[str] = []
    for entity, _alias in entities:
        sender, subject, body, answer = _fact_email(kind, entity, rng)
        if answer in answers:  # keep answers distinct so that scoring is unambiguous
            return make_inbox(seed + 7919 * (1 + VAL_SEED_START), config)
        drafts.append((sender, subject, body))
        answers.append(answer)
    # Filler: other kinds' facts (realistic, never about the question's entities) and everyday mail.
    while len(drafts) < config.num_emails:
        if rng.random() < 0.4:
            other = rng.choice([k for k in KINDS if k != kind])
            sender, subject, body, _ = _fact_email(other, rng.choice(ENTITIES[other])[0], rng)
        else:
            sender, subject, body = rng.choice(FILLER)
            name, address = _person(rng)
            fill = {"person": address, "first": name.split()[0], "w1": rng.choice(WORDS),
                    "w2": rng.choice(WORDS), "date": _date(rng), "weekday": rng.choice(WEEKDAYS)}  # fmt: skip
            sender, body = sender.format(**fill), body.format(**fill)
        drafts.append((sender, subject, body))
    dates = sorted(_date(rng) for _ in drafts)
    order = list(range(len(drafts)))
    rng.shuffle(order)  # order[k] = which draft becomes the k-th email (oldest first)
    emails = tuple(Email(k + 1, *drafts[d][:2], dates[k], drafts[d][2]) for k, d in enumerate(order))
    entity, alias = entities[0]
    question = Question(
        text=QUESTIONS[kind](entity if config.keyword_in_question else alias),
        answer=answers[0],
        kind=kind,
        target_id=order.index(0) + 1,
        distractor_answers=tuple(answers[1:]),
    )
    return Inbox(emails, question)


# ---------------------------------------------------------------- scoring


def normalize(text: str) -> str:
    """Lower-case alphanumerics only: "SW-418." and "sw418" compare equal."""
    return re.sub(r"[^a-z0-9]", "", text.lower())


def is_correct(answer: str | None, question: Question) -> bool:
    """Whether `answer` states the ground truth (and no distractor's answer); see the module docstring."""
    if not answer or len(answer) > MAX_ANSWER_CHARS:
        return False
    got = normalize(answer)
    if not got or normalize(question.answer) not in got:
        return False
    return not any(normalize(other) in got for other in question.distractor_answers)


# ---------------------------------------------------------------- database and tools

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


TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "search_emails",
            "description": "Search the inbox by keywords. Returns matching emails with their ids.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string", "description": "keywords to look for"}},
                "required": ["query"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "read_email",
            "description": "Read one email by its id.",
            "parameters": {
                "type": "object",
                "properties": {"id": {"type": "integer", "description": "the email's id"}},
                "required": ["id"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "answer",
            "description": "Give your final answer to the question. This ends the task.",
            "parameters": {
                "type": "object",
                "properties": {"text": {"type": "string", "description": "the answer, short"}},
                "required": ["text"],
            },
        },
    },
]


@dataclass
class ToolResult:
    """What one tool call returned, and what it tells the scorer."""

    content: str  # the tool message's content (JSON, or an error sentence)
    ok: bool  # a known tool with valid arguments
    answer: str | None = None  # set by `answer`
    found_ids: list[int] = field(default_factory=list)  # search hits
    read_id: int | None = None  # the email read


def run_tool(db: InboxDB, name: str, arguments: str, config: InboxConfig) -> ToolResult:
    """Execute one tool call (arguments as the JSON string of the API); bad calls return an error text."""
    try:
        args = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError:
        return ToolResult(f"error: arguments are not valid JSON: {arguments[:100]}", ok=False)
    if not isinstance(args, dict):
        return ToolResult("error: arguments must be a JSON object", ok=False)
    if name == "search_emails":
        query = args.get("query")
        if not isinstance(query, str):
            return ToolResult('error: search_emails needs {"query": "<keywords>"}', ok=False)
        hits = db.search(query, config.max_results, config.snippet_in_search)
        return ToolResult(
            json.dumps(hits) if hits else "no emails found", ok=True, found_ids=[h["id"] for h in hits]
        )
    if name == "read_email":
        raw: Any = args.get("id", args.get("email_id"))
        try:
            email_id = int(raw)  # accept "3" as well as 3
        except (TypeError, ValueError):
            return ToolResult('error: read_email needs {"id": <email id>}', ok=False)
        email = db.read(email_id)
        if email is None:
            return ToolResult(f"error: no email with id {email_id}", ok=True)
        return ToolResult(json.dumps(email.as_dict()), ok=True, read_id=email_id)
    if name == "answer":
        text = args.get("text", args.get("answer"))
        if not isinstance(text, str):
            return ToolResult('error: answer needs {"text": "<your answer>"}', ok=False)
        return ToolResult("answer recorded", ok=True, answer=text)
    return ToolResult(f"error: unknown tool {name!r}; use search_emails, read_email or answer", ok=False)
