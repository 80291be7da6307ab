"""The synthetic inbox: a seeded generator of mailboxes, emails and questions, stored in SQLite with FTS5.

`Inbox.build(InboxConfig(seed=0))` makes, from nothing but the config, `mailboxes` inboxes (one owner each)
of `emails_per_mailbox` emails: orders (and their shipping notices), flights, hotel bookings, meetings,
invoices, threads with a reply that changes the plan, and everyday filler (newsletters, promotions,
notes from friends and colleagues) that mentions the same shops, places and topics. About one email in
four holds a fact, and each fact gives one question whose answer is a short string copied from an email
(a name, a date, an amount, a place, a code); the question carries the ids of its source emails (two for
a thread: the plan and the reply that changed it). No email is the source of two questions.

Split: the last `val_mailboxes` mailboxes hold the held-out (val) questions, the others the training
questions, so no email a held-out question is about is ever seen while training (searches stay inside
the question's mailbox). Difficulty, measured on the store itself with the expert's search
(`Question.keywords`): "easy" when the answer already shows in the search results (a subject, a sender,
a snippet), "medium" when the top hit must be read, "hard" when the source is not the top hit or the
answer needs two emails.

Storage: one SQLite database (`path`, or ":memory:") with tables `meta` (the config), `emails`,
`emails_fts` (FTS5, porter stemming, over sender, subject and body) and `questions`. The same config
always writes the same bytes (`Inbox.dump()` is the text form of the whole store). `Inbox.open(path)`
reads a store written before. Bad input (a seed or question id outside the generated set, a missing
file, a split the inbox is too small for) raises `EmailAgentInputError`: one line naming the field and
the fix.

    python -m art.examples.email_agent.inbox --seed 0 --out inbox.sqlite   # write a store, print counts
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import random
import re
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

MAX_SEED = 999_999
YEAR = 2024
MIN_EMAILS_PER_MAILBOX = 40
FACT_SHARE = 0.3  # fact emails (orders, flights, ...) per email; the rest is filler
DIFFICULTIES = ("easy", "medium", "hard")


class EmailAgentInputError(ValueError):
    """Bad input to the email agent (a seed, question id, file or split): one line naming the field and
    the fix. The train script prints it and exits with status 2."""


@dataclass(frozen=True)
class InboxConfig:
    """What to generate: the seed, how many mailboxes and emails, and how many mailboxes are held out.

    The defaults (6 mailboxes of 500 emails) give 3,000 emails and about 700 questions, ~120 of them
    held out (the sixth mailbox).
    """

    seed: int = 0
    mailboxes: int = 6
    emails_per_mailbox: int = 500
    val_mailboxes: int = 1
    max_results: int = 5  # hits the expert's search may look at (difficulty is measured with it)

    def __post_init__(self) -> None:
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed <= MAX_SEED:
            raise EmailAgentInputError(f"seed: must be an integer from 0 to {MAX_SEED}, got {self.seed!r}")
        if not 2 <= self.mailboxes <= len(OWNERS):
            raise EmailAgentInputError(f"mailboxes: must be 2 to {len(OWNERS)}, got {self.mailboxes}")
        if not 1 <= self.val_mailboxes < self.mailboxes:
            raise EmailAgentInputError(
                f"val_mailboxes: must be 1 to {self.mailboxes - 1} (mailboxes - 1), got {self.val_mailboxes}"
            )
        if self.emails_per_mailbox < MIN_EMAILS_PER_MAILBOX:
            raise EmailAgentInputError(
                f"emails_per_mailbox: must be at least {MIN_EMAILS_PER_MAILBOX}, got {self.emails_per_mailbox}"
            )
        if not 1 <= self.max_results <= 20:
            raise EmailAgentInputError(f"max_results: must be 1 to 20, got {self.max_results}")


@dataclass(frozen=True)
class Email:
    """One email. `id` is unique in the store (chronological); `mailbox` is its owner's address."""

    id: int
    mailbox: str
    sender: str  # "Name <address>"
    recipient: str
    subject: str
    date: str  # YYYY-MM-DD
    body: str
    reply_to: int | None = None  # the email this one answers (threads)


@dataclass(frozen=True)
class Question:
    """A question about one mailbox, its short answer and where the answer lives.

    `source_ids`: every email the answer needs (one, or two for a thread); `answer_id`: the one holding
    the answer string; `keywords`: what the scripted expert searches for.
    """

    id: int
    mailbox: str
    owner: str
    text: str
    answer: str
    source_ids: tuple[int, ...]
    answer_id: int
    kind: str
    difficulty: str
    split: str
    keywords: str


# ---------------------------------------------------------------- vocabulary

FIRST_NAMES = ["Maria", "James", "Aisha", "Chen", "Lucas", "Priya", "Olga", "Tom", "Fatima", "Diego",
               "Hana", "Peter", "Zoe", "Ravi", "Elena", "Kofi", "Ingrid", "Mateo", "Nadia", "Oscar"]  # fmt: skip
LAST_NAMES = ["Lopez", "Smith", "Khan", "Wei", "Martin", "Patel", "Ivanova", "Brown", "Haddad", "Garcia",
              "Sato", "Novak", "Evans", "Rao", "Rossi", "Mensah", "Berg", "Silva", "Okafor", "Dubois"]  # fmt: skip
OWNERS = [("Sam", "Carter"), ("Alex", "Morgan"), ("Jordan", "Lee"), ("Robin", "Shaw"),
          ("Casey", "Nolan"), ("Taylor", "Reed"), ("Jamie", "Fox"), ("Avery", "Quinn")]  # fmt: skip
COMPANIES = [
    "northpeak",
    "bluefin",
    "copperleaf",
    "meridian",
    "tallgrass",
    "lumenworks",
    "driftwood",
    "ironbark",
]
SHOPS = [("Northwind", "NW"), ("Bluebird Goods", "BB"), ("Acme Outlet", "AC"), ("Pinecone Market", "PM"),
         ("Harbor Supply", "HS"), ("Summit Sports", "SS"), ("Lumen Electronics", "LE"), ("Oak and Ivy", "OI")]  # fmt: skip
ITEMS = ["espresso machine", "running shoes", "desk lamp", "backpack", "blender", "yoga mat", "headphones",
         "winter jacket", "office chair", "coffee grinder", "bike helmet", "rice cooker", "standing desk",
         "phone case", "water bottle", "sleeping bag", "tennis racket", "electric kettle", "wall clock",
         "camping stove", "laptop stand", "rain boots", "toaster", "bookshelf"]  # fmt: skip
CARRIERS = ["FastShip", "ParcelGo", "QuickPost"]
CITIES = ["Paris", "Tokyo", "Madrid", "Rome", "Berlin", "Lisbon", "Cairo", "Oslo", "Vienna", "Prague",
          "Dublin", "Athens", "Seoul", "Lima", "Nairobi", "Toronto", "Chicago", "Sydney", "Istanbul", "Warsaw"]  # fmt: skip
HOME_CITIES = ["Boston", "Denver", "Seattle", "Austin", "Atlanta", "Portland", "Phoenix", "Miami"]
AIRLINES = [("SkyWays", "SW"), ("Northern Air", "NA"), ("BlueJet", "BJ")]
HOTELS = ["Hotel Astoria", "Grand Harbor Hotel", "Hotel Lindenhof", "Park View Hotel", "Hotel Solara",
          "Riverside Inn", "Hotel Mirabel", "Old Town Hotel"]  # fmt: skip
TOPICS = ["budget review", "product launch", "hiring plan", "office move", "security audit", "customer survey",
          "website redesign", "quarterly planning", "vendor selection", "sales forecast", "team offsite",
          "data migration", "pricing update", "onboarding process", "annual report", "mobile app",
          "brand refresh", "support backlog", "cloud costs", "partner program", "training day",
          "risk assessment", "roadmap review", "press release", "code freeze", "design sprint",
          "benefits update", "travel policy"]  # fmt: skip
VENDORS = [("PowerCo", "electricity"), ("AquaWorks", "water"), ("FiberNet", "internet"), ("CityGym", "gym membership"),
           ("Brightside Cleaning", "cleaning"), ("Ledger and Co", "accounting"), ("SafeHome", "home insurance")]  # fmt: skip
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]  # fmt: skip
EVENTS = ["team lunch", "book club", "farewell drinks", "board game night", "birthday dinner", "quiz night",
          "project celebration", "coffee catch-up", "welcome breakfast", "karaoke night", "pizza evening",
          "alumni meetup", "charity run briefing", "wine tasting"]  # fmt: skip
VENUES = ["Luigi's", "The Green Fork", "Sakura House", "Cafe Central", "The Old Mill", "Blue Lagoon Bar",
          "Casa Rosa", "The Lantern", "Harvest Table", "Copper Kettle", "The Rooftop", "Olive Grove"]  # fmt: skip
WORDS = ["maple", "river", "stone", "cloud", "amber", "cedar", "tiger", "lemon", "orbit", "pearl"]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
LETTERS = "ABCDEFGHJKLMNPRSTUVWXYZ"

# kind -> share of a mailbox's fact emails, and the most facts of that kind one mailbox can hold
KIND_SHARES = {"order": 0.3, "flight": 0.1, "hotel": 0.1, "meeting": 0.17, "invoice": 0.18, "thread": 0.15}


# ---------------------------------------------------------------- drafts


@dataclass(eq=False)
class _Draft:
    """An email before it has an id; `fact` links it to the question it may answer."""

    sender: str
    subject: str
    date: dt.date
    body: str
    reply_to: _Draft | None = None
    email_id: int = 0


@dataclass(eq=False)
class _Fact:
    """A fact: the emails that hold it and the question asked about it (one per fact)."""

    kind: str
    emails: list[_Draft]
    answer_email: _Draft
    text: str
    answer: str
    keywords: str


class _Mailbox:
    """The generator of one mailbox: its owner, the people who write, and unique-key bookkeeping."""

    def __init__(self, index: int, rng: random.Random) -> None:
        first, last = OWNERS[index]
        company = COMPANIES[index]
        self.rng = rng
        self.first = first
        self.owner = f"{first} {last}"
        self.address = f"{first.lower()}.{last.lower()}@{company}.example"
        self.domain = f"{company}.example"
        self.home = HOME_CITIES[index]
        people = [(f, la) for f in FIRST_NAMES for la in LAST_NAMES]
        chosen = rng.sample(people, 18)
        self.colleagues = [self._person(f, la, self.domain) for f, la in chosen[:12]]
        self.friends = [self._person(f, la, "mail.example") for f, la in chosen[12:]]

    @staticmethod
    def _person(first: str, last: str, domain: str) -> tuple[str, str]:
        return f"{first} {last}", f"{first} {last} <{first.lower()}.{last.lower()}@{domain}>"


class _Codes:
    """Unique codes for the whole store (order, invoice, booking numbers never repeat)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used: set[str] = set()

    def new(self, make: Callable[[random.Random], str]) -> str:
        while True:
            code = make(self.rng)
            if code not in self.used:
                self.used.add(code)
                return code


def _day(rng: random.Random) -> dt.date:
    return dt.date(YEAR, 1, 1) + dt.timedelta(days=rng.randrange(0, 350))


def _time(rng: random.Random) -> str:
    return f"{rng.randint(8, 18)}:{rng.choice(['00', '15', '30', '45'])}"


def _amount(rng: random.Random, low: int, high: int) -> str:
    return f"${rng.randint(low, high)}.{rng.choice(['00', '50', '99', f'{rng.randint(0, 99):02d}'])}"


def _order(box: _Mailbox, codes: _Codes, key: tuple[str, str], prefix: str) -> list[_Fact]:
    rng, (shop, item) = box.rng, key
    sent = _day(rng)
    number = codes.new(lambda r: f"{prefix}-{r.randint(10000, 99999)}")
    total, delivery = _amount(rng, 9, 480), str(sent + dt.timedelta(days=rng.randint(2, 9)))
    slug = shop.lower().replace(" ", "")
    sender = f"{shop} <orders@{slug}.example>"
    confirm = _Draft(
        sender, f"Order {number} confirmed: {item}", sent,
        f"Hi {box.first},\n\nThanks for shopping at {shop}! Your order {number} for a {item} is confirmed.\n"
        f"Total: {total}\nEstimated delivery: {delivery}\n\nThe {shop} team",
    )  # fmt: skip
    about = f"the {item} I ordered from {shop}"
    keywords = f"{shop} {item}"
    facts = {
        "number": _Fact(
            "order", [confirm], confirm, f"What is the order number of {about}?", number, keywords
        ),
        "total": _Fact("order", [confirm], confirm, f"How much did {about} cost?", total, keywords),
        "delivery": _Fact("order", [confirm], confirm, f"When will {about} arrive?", delivery, keywords),
    }
    if rng.random() < 0.5:  # a shipping notice: another email about the same order
        tracking = codes.new(lambda r: f"{r.choice(LETTERS)}{r.choice(LETTERS)}{r.randint(1000000, 9999999)}")
        carrier = rng.choice(CARRIERS)
        ship = _Draft(
            sender, f"Your {item} has shipped", sent + dt.timedelta(days=1),
            f"Hi {box.first},\n\nGood news: order {number} ({item}) left our warehouse with {carrier}.\n"
            f"Tracking number: {tracking}\n\nThe {shop} team",
        )  # fmt: skip
        facts["tracking"] = _Fact(
            "order", [ship], ship, f"What is the tracking number of {about}?", tracking, keywords
        )
        for fact in facts.values():  # the notice is part of the fact: it is nobody else's source
            if ship not in fact.emails:
                fact.emails = [*fact.emails, ship]
    return [facts[rng.choice(sorted(facts))]]


def _flight(box: _Mailbox, codes: _Codes, city: str) -> list[_Fact]:
    rng = box.rng
    airline, code = rng.choice(AIRLINES)
    sent = _day(rng)
    departs = str(sent + dt.timedelta(days=rng.randint(5, 60)))
    number = codes.new(lambda r: f"{code}{r.randint(100, 9999)}")
    seat = f"{rng.randint(1, 38)}{rng.choice('ABCDEF')}"
    confirmation = codes.new(lambda r: "".join(r.choice(LETTERS + "23456789") for _ in range(6)))
    leaves = _time(rng)
    slug = airline.lower().replace(" ", "")
    email = _Draft(
        f"{airline} <bookings@{slug}.example>", f"Your flight to {city} on {departs}", sent,
        f"Dear {box.first},\n\nYour booking is confirmed.\nFlight: {number}\nFrom: {box.home}\nTo: {city}\n"
        f"Departure: {departs} at {leaves}\nSeat: {seat}\nConfirmation code: {confirmation}\n\n"
        f"Have a good trip,\n{airline}",
    )  # fmt: skip
    keywords = f"flight {city}"
    options = [
        (f"On what date do I fly to {city}?", departs),
        (f"What is the flight number of my flight to {city}?", number),
        (f"What seat do I have on my flight to {city}?", seat),
        (f"What is the confirmation code of my flight to {city}?", confirmation),
        (f"What time does my flight to {city} leave?", leaves),
    ]
    text, answer = rng.choice(options)
    return [_Fact("flight", [email], email, text, answer, keywords)]


def _hotel(box: _Mailbox, codes: _Codes, city: str) -> list[_Fact]:
    rng = box.rng
    hotel = rng.choice(HOTELS)
    sent = _day(rng)
    check_in = str(sent + dt.timedelta(days=rng.randint(5, 60)))
    reference = codes.new(lambda r: f"HB-{r.randint(10000, 99999)}")
    nights = rng.randint(1, 6)
    slug = hotel.lower().replace(" ", "")
    email = _Draft(
        f"{hotel} <stay@{slug}.example>", f"Booking confirmed: {hotel}, {city}", sent,
        f"Dear {box.first},\n\nWe look forward to your stay at our hotel in {city}.\nCheck-in: {check_in}\n"
        f"Nights: {nights}\nBooking reference: {reference}\n\n{hotel}",
    )  # fmt: skip
    options = [
        (f"Which hotel did I book in {city}?", hotel),
        (f"What is the booking reference of my hotel in {city}?", reference),
        (f"When do I check in at my hotel in {city}?", check_in),
    ]
    text, answer = rng.choice(options)
    return [_Fact("hotel", [email], email, text, answer, f"hotel {city}")]


def _meeting(box: _Mailbox, topic: str) -> list[_Fact]:
    rng = box.rng
    name, sender = rng.choice(box.colleagues)
    sent = _day(rng)
    when, at = str(sent + dt.timedelta(days=rng.randint(1, 14))), _time(rng)
    room = f"{rng.choice(LETTERS)}{rng.randint(100, 499)}"
    email = _Draft(
        sender, f"Meeting: {topic}", sent,
        f"Hi {box.first},\n\nLet's meet on {when} at {at} in room {room} to go over the {topic}.\n\n"
        f"Best,\n{name.split()[0]}",
    )  # fmt: skip
    options = [
        (f"Who set up the meeting about the {topic}?", name),
        (f"Which room is the {topic} meeting in?", room),
        (f"What time is the {topic} meeting?", at),
        (f"On what date is the {topic} meeting?", when),
    ]
    text, answer = rng.choice(options)
    return [_Fact("meeting", [email], email, text, answer, f"{topic} meeting")]


def _invoice(box: _Mailbox, codes: _Codes, key: tuple[str, str, int]) -> list[_Fact]:
    rng, (vendor, service, month) = box.rng, key
    sent = dt.date(YEAR, month + 1, rng.randint(1, 5))
    number = codes.new(lambda r: f"INV-{r.randint(10000, 99999)}")
    amount, due = _amount(rng, 20, 400), str(sent + dt.timedelta(days=rng.randint(14, 30)))
    period = f"{MONTHS[month]} {YEAR}"
    slug = vendor.lower().replace(" ", "")
    email = _Draft(
        f"{vendor} Billing <billing@{slug}.example>", f"Invoice {number} for {period}", sent,
        f"Hello {box.first},\n\nYour {service} invoice {number} for {period} is ready.\nAmount due: {amount}\n"
        f"Due date: {due}\n\n{vendor} Billing",
    )  # fmt: skip
    about = f"the {vendor} invoice for {MONTHS[month]}"
    options = [
        (f"How much is {about}?", amount),
        (f"When is {about} due?", due),
        (f"What is the number of {about}?", number),
    ]
    text, answer = rng.choice(options)
    return [_Fact("invoice", [email], email, text, answer, f"{vendor} invoice {MONTHS[month]}")]


def _thread(box: _Mailbox, event: str) -> list[_Fact]:
    rng = box.rng
    (first_name, first_sender), (second_name, second_sender) = rng.sample(box.colleagues + box.friends, 2)
    sent = _day(rng)
    when = sent + dt.timedelta(days=rng.randint(3, 10))
    old, new = rng.sample(VENUES, 2)
    at = _time(rng)
    subject = f"{event.capitalize()} on {WEEKDAYS[when.weekday()]}"
    plan = _Draft(
        first_sender, subject, sent,
        f"Hi {box.first},\n\nShall we have the {event} at {old} on {when} at {at}?\n\n{first_name.split()[0]}",
    )  # fmt: skip
    reply = _Draft(
        second_sender, f"Re: {subject}", sent + dt.timedelta(days=rng.randint(0, 2)),
        f"Hi both,\n\n{old} is fully booked that day. Let's go to {new} instead, same time.\n\n"
        f"{second_name.split()[0]}",
        reply_to=plan,
    )  # fmt: skip
    options = [
        (f"Where is the {event} now?", new),
        (f"Who changed the place of the {event}?", second_name),
    ]
    text, answer = rng.choice(options)
    return [_Fact("thread", [plan, reply], reply, text, answer, event)]


def _filler(box: _Mailbox) -> _Draft:
    """An email no question is about; many mention the shops, places and topics the facts use."""
    rng = box.rng
    name, sender = rng.choice(box.friends)
    colleague, work_sender = rng.choice(box.colleagues)
    shop = rng.choice(SHOPS)[0]
    w1, w2 = rng.sample(WORDS, 2)
    options = [
        ("Daily Brief <news@dailybrief.example>", "Your weekly digest",
         f"Top stories this week: {w1} prices, a {w2} festival in {rng.choice(CITIES)} and local elections."),
        (f"{shop} <deals@{shop.lower().replace(' ', '')}.example>", f"{rng.randint(10, 40)}% off this week",
         f"Hi {box.first},\n\nThis week only: great prices on every {rng.choice(ITEMS)} and {rng.choice(ITEMS)}."),
        (sender, "Photos from the weekend",
         f"Hi {box.first},\n\nHere are the photos from the {w1} hike. What a great day!\n\n{name.split()[0]}"),
        (work_sender, f"Notes: {rng.choice(TOPICS)}",
         f"Hi team,\n\nShort notes from today: the {rng.choice(TOPICS)} is on track. More soon.\n\n"
         f"{colleague.split()[0]}"),
        ("Accounts <no-reply@accounts.example>", "Password changed",
         "The password of your account was changed. If this was not you, contact support."),
        (sender, "Recipe you asked for",
         f"Hi {box.first},\n\nThe secret is {w1} zest and a pinch of salt. Enjoy!\n\n{name.split()[0]}"),
        ("TravelDeals <offers@traveldeals.example>", f"Weekend in {rng.choice(CITIES)}?",
         f"Flights and hotels in {rng.choice(CITIES)} from {_amount(rng, 90, 300)}. Book by Sunday."),
        (sender, "Reading group",
         f"Hi all,\n\nThis month we read \"The {w1.capitalize()} {w2.capitalize()}\". "
         f"See you at {rng.choice(VENUES)}!\n\n{name.split()[0]}"),
        (work_sender, "Quick question",
         f"Hi {box.first},\n\nDo you have the slides from the {rng.choice(TOPICS)}? Thanks!\n\n"
         f"{colleague.split()[0]}"),
        ("City Gym <hello@citygym.example>", "New classes this month",
         f"We added {w1} yoga and {w2} spin classes. Book in the app."),
    ]  # fmt: skip
    sender_, subject, body = rng.choice(options)
    return _Draft(sender_, subject, _day(rng), body)


def _facts(box: _Mailbox, codes: _Codes, count: int) -> list[_Fact]:
    """About `count` fact emails' worth of facts, every key (shop and item, city, topic ...) once."""
    rng = box.rng
    order_keys = [(shop, item) for shop, _ in SHOPS for item in ITEMS]
    prefixes = dict(SHOPS)
    invoice_keys = [(v, s, m) for v, s in VENDORS for m in range(12)]
    topics = rng.sample(TOPICS, len(TOPICS))
    pools: dict[str, list[Any]] = {
        "order": rng.sample(order_keys, len(order_keys)),
        "flight": rng.sample(CITIES, len(CITIES)),
        "hotel": rng.sample(CITIES, len(CITIES)),
        "meeting": topics,
        "invoice": rng.sample(invoice_keys, len(invoice_keys)),
        "thread": rng.sample(EVENTS, len(EVENTS)),
    }
    facts: list[_Fact] = []
    for kind, share in KIND_SHARES.items():
        emails_each = 2 if kind == "thread" else 1
        for _ in range(min(round(count * share / emails_each), len(pools[kind]))):
            key = pools[kind].pop()
            if kind == "order":
                facts += _order(box, codes, key, prefixes[key[0]])
            elif kind == "flight":
                facts += _flight(box, codes, key)
            elif kind == "hotel":
                facts += _hotel(box, codes, key)
            elif kind == "meeting":
                facts += _meeting(box, key)
            elif kind == "invoice":
                facts += _invoice(box, codes, key)
            else:
                facts += _thread(box, key)
    return facts


# ---------------------------------------------------------------- the store

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE emails (
    id INTEGER PRIMARY KEY, mailbox TEXT NOT NULL, sender TEXT NOT NULL, recipient TEXT NOT NULL,
    subject TEXT NOT NULL, date TEXT NOT NULL, body TEXT NOT NULL, reply_to INTEGER);
CREATE INDEX emails_mailbox_date ON emails (mailbox, date);
CREATE VIRTUAL TABLE emails_fts USING fts5(
    sender, subject, body, content='emails', content_rowid='id', tokenize='porter unicode61');
CREATE TABLE questions (
    id INTEGER PRIMARY KEY, mailbox TEXT NOT NULL, owner TEXT NOT NULL, text TEXT NOT NULL,
    answer TEXT NOT NULL, source_ids TEXT NOT NULL, answer_id INTEGER NOT NULL, kind TEXT NOT NULL,
    difficulty TEXT NOT NULL, split TEXT NOT NULL, keywords TEXT NOT NULL);
"""

STOPWORDS = frozenset(
    {"a", "an", "and", "are", "at", "about", "by", "did", "do", "does", "for", "from", "how", "i", "in", "is",
     "it", "me", "my", "of", "on", "or", "the", "to", "was", "what", "when", "where", "which", "who", "why",
     "will", "with", "you", "your", "email", "emails", "now", "much", "many"}
)  # fmt: skip
DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


@dataclass(frozen=True)
class SearchHit:
    """One search result: the email's id, sender, subject, date and a snippet of its body."""

    id: int
    sender: str
    subject: str
    date: str
    snippet: str


def search_words(keywords: str) -> list[str]:
    """The words a search looks for: lower-case alphanumerics, stop words dropped, each once, in order."""
    words = [w for w in re.findall(r"[a-z0-9]+", keywords.lower()) if w not in STOPWORDS]
    return list(dict.fromkeys(words))


def parse_date(value: str) -> dt.date | None:
    """A YYYY-MM-DD date, or None when `value` is not one."""
    if not DATE.fullmatch(value):
        return None
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        return None


class Inbox:
    """The store: emails and questions in SQLite (FTS5 over sender, subject and body).

    Build one with `Inbox.build(config, path)`, open a written one with `Inbox.open(path)`.
    """

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self._load()

    def _load(self) -> None:
        """Read the config, the mailboxes and the questions from the database."""
        conn = self.conn
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        self.config = InboxConfig(**json.loads(meta["config"]))
        self.mailboxes: list[str] = json.loads(meta["mailboxes"])
        rows = conn.execute(
            "SELECT id, mailbox, owner, text, answer, source_ids, answer_id, kind, difficulty, split, keywords "
            "FROM questions ORDER BY id"
        ).fetchall()
        self._questions = [
            Question(r[0], r[1], r[2], r[3], r[4], tuple(json.loads(r[5])), r[6], r[7], r[8], r[9], r[10])
            for r in rows
        ]

    # -- building and opening

    @classmethod
    def build(cls, config: InboxConfig | None = None, path: str | Path = ":memory:") -> Inbox:
        """Generate the store for `config` into `path` (a file, replaced if it exists, or ":memory:")."""
        config = config or InboxConfig()
        if str(path) != ":memory:":
            target = Path(path)
            if not target.parent.is_dir():
                raise EmailAgentInputError(f"database: no folder {target.parent} to write {target.name} in")
            if target.is_dir():
                raise EmailAgentInputError(
                    f"database: {target} is a folder; give a file's name, e.g. {target / 'inbox.sqlite'}"
                )
            target.unlink(missing_ok=True)
        conn = sqlite3.connect(str(path), check_same_thread=False)
        conn.executescript(SCHEMA)
        boxes, facts = _generate(config)
        with conn:
            conn.execute("INSERT INTO meta VALUES ('config', ?)", (json.dumps(dataclasses.asdict(config)),))
            conn.execute(
                "INSERT INTO meta VALUES ('mailboxes', ?)", (json.dumps([b.address for b in boxes]),)
            )
            conn.executemany(
                "INSERT INTO emails VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (d.email_id, box.address, d.sender, box.address, d.subject, str(d.date), d.body,
                     d.reply_to.email_id if d.reply_to else None)
                    for box, drafts in boxes.items() for d in drafts
                ],
            )  # fmt: skip
            conn.execute("INSERT INTO emails_fts (emails_fts) VALUES ('rebuild')")
        inbox = cls(conn)
        inbox._add_questions(boxes, facts)
        return inbox

    @classmethod
    def open(cls, path: str | Path) -> Inbox:
        """Open a store written by `build` (read-only); a missing or foreign file is an input error."""
        target = Path(path)
        if not target.is_file():
            raise EmailAgentInputError(
                f"database: no file at {target}; write one with "
                f"`python -m art.examples.email_agent.inbox --out {target}`"
            )
        conn = sqlite3.connect(f"file:{target}?mode=ro", uri=True, check_same_thread=False)
        try:
            return cls(conn)
        except (sqlite3.DatabaseError, KeyError, TypeError) as exc:
            conn.close()
            raise EmailAgentInputError(
                f"database: {target} is not an email-agent inbox ({exc}); write one with "
                f"`python -m art.examples.email_agent.inbox --out {target}`"
            ) from None

    def _add_questions(self, boxes: dict[_Mailbox, list[_Draft]], facts: dict[_Mailbox, list[_Fact]]) -> None:
        val = {b.address for b in list(boxes)[-self.config.val_mailboxes :]}
        rows: list[tuple[Any, ...]] = []
        for box, box_facts in facts.items():
            for fact in box_facts:
                ids = tuple(sorted(d.email_id for d in fact.emails))
                answer_id = fact.answer_email.email_id
                sources = (answer_id,) if fact.kind != "thread" else ids
                hits = self.search(box.address, fact.keywords, limit=self.config.max_results)
                difficulty = _difficulty(hits, fact.answer, sources)
                split = "val" if box.address in val else "train"
                rows.append(
                    (len(rows), box.address, box.owner, fact.text, fact.answer, json.dumps(list(sources)),
                     answer_id, fact.kind, difficulty, split, fact.keywords)
                )  # fmt: skip
        with self.conn:
            self.conn.executemany("INSERT INTO questions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        self._load()  # the questions as stored

    def close(self) -> None:
        """Close the database connection."""
        self.conn.close()

    def dump(self) -> str:
        """The whole store as SQL text (the same config always gives the same text)."""
        return "\n".join(self.conn.iterdump())

    # -- questions

    def questions(self, split: str | None = None, difficulty: str | None = None) -> list[Question]:
        """Every question, or those of one split ("train", "val") and/or difficulty, in id order."""
        return [
            q
            for q in self._questions
            if (split is None or q.split == split) and (difficulty is None or q.difficulty == difficulty)
        ]

    def question(self, question_id: int) -> Question:
        """The question with this id; an input error naming the valid range otherwise."""
        if isinstance(question_id, bool) or not isinstance(question_id, int):
            raise EmailAgentInputError(f"question id: must be an integer, got {question_id!r}")
        if not 0 <= question_id < len(self._questions):
            raise EmailAgentInputError(
                f"question id: {question_id} is not in this inbox (seed {self.config.seed}); "
                f"use 0 to {len(self._questions) - 1}"
            )
        return self._questions[question_id]

    def split(self, split: str, n: int, field: str) -> list[Question]:
        """The first `n` questions of `split`; an input error (naming `field`) if there are fewer."""
        available = self.questions(split)
        if n > len(available):
            raise EmailAgentInputError(
                f"{field}: the inbox (seed {self.config.seed}, {self.config.mailboxes} mailboxes of "
                f"{self.config.emails_per_mailbox} emails) has {len(available)} {split} questions, asked for {n}; "
                f"ask for at most {len(available)} or generate more emails per mailbox"
            )
        return available[:n]

    # -- the tools' queries

    def email(self, email_id: int, mailbox: str) -> Email | None:
        """The email with this id in `mailbox`, or None (an email of another mailbox is not found)."""
        row = self.conn.execute(
            "SELECT id, mailbox, sender, recipient, subject, date, body, reply_to FROM emails "
            "WHERE id = ? AND mailbox = ?",
            (email_id, mailbox),
        ).fetchone()
        return Email(*row) if row else None

    def search(
        self,
        mailbox: str,
        keywords: str,
        *,
        from_address: str | None = None,
        sent_after: str | None = None,
        sent_before: str | None = None,
        limit: int = 5,
    ) -> list[SearchHit]:
        """Emails of `mailbox` matching any of the keywords (stop words dropped), best BM25 match first
        (subject words count most); `from_address` matches part of the sender; dates are inclusive."""
        words = search_words(keywords)
        if not words:
            return []
        where, params = (
            ["emails_fts MATCH ?", "e.mailbox = ?"],
            [" OR ".join(f'"{w}"' for w in words), mailbox],
        )
        if from_address:
            where.append("lower(e.sender) LIKE ?")
            params.append(f"%{from_address.lower()}%")
        if sent_after:
            where.append("e.date >= ?")
            params.append(sent_after)
        if sent_before:
            where.append("e.date <= ?")
            params.append(sent_before)
        rows = self.conn.execute(
            "SELECT e.id, e.sender, e.subject, e.date, snippet(emails_fts, 2, '', '', ' ... ', 12) "
            "FROM emails_fts JOIN emails e ON e.id = emails_fts.rowid "
            f"WHERE {' AND '.join(where)} ORDER BY bm25(emails_fts, 2.0, 3.0, 1.0), e.id LIMIT ?",
            (*params, limit),
        ).fetchall()
        return [SearchHit(r[0], r[1], r[2], r[3], " ".join(r[4].split())) for r in rows]

    def count(self, mailbox: str | None = None) -> int:
        """How many emails the store (or one mailbox) holds."""
        if mailbox is None:
            return int(self.conn.execute("SELECT COUNT(*) FROM emails").fetchone()[0])
        return int(
            self.conn.execute("SELECT COUNT(*) FROM emails WHERE mailbox = ?", (mailbox,)).fetchone()[0]
        )

    def owner(self, mailbox: str) -> str:
        """The mailbox owner's name."""
        first, last = mailbox.split("@")[0].split(".")
        return f"{first.capitalize()} {last.capitalize()}"


def _difficulty(hits: Sequence[SearchHit], answer: str, sources: tuple[int, ...]) -> str:
    """easy: the answer shows in the expert's search results; medium: the top hit must be read; hard:
    two sources, or a source that is not the top hit (or not found at all)."""
    ids = [h.id for h in hits]
    if len(sources) > 1 or not ids or ids[0] != sources[0]:
        return "hard"
    top = hits[0]
    shown = f"{top.sender} {top.subject} {top.date} {top.snippet}"
    return "easy" if answer in shown else "medium"


def _generate(config: InboxConfig) -> tuple[dict[_Mailbox, list[_Draft]], dict[_Mailbox, list[_Fact]]]:
    """Every mailbox's emails (with ids: chronological over the store) and facts."""
    codes = _Codes(random.Random(f"email-agent:{config.seed}:codes"))
    boxes: dict[_Mailbox, list[_Draft]] = {}
    facts: dict[_Mailbox, list[_Fact]] = {}
    for index in range(config.mailboxes):
        rng = random.Random(f"email-agent:{config.seed}:mailbox:{index}")
        box = _Mailbox(index, rng)
        box_facts = _facts(box, codes, round(config.emails_per_mailbox * FACT_SHARE))
        drafts = list(dict.fromkeys(d for f in box_facts for d in f.emails))
        while len(drafts) < config.emails_per_mailbox:
            drafts.append(_filler(box))
        boxes[box], facts[box] = drafts[: config.emails_per_mailbox], box_facts
    ordered = sorted(
        ((d.date, index, k, d) for index, drafts in enumerate(boxes.values()) for k, d in enumerate(drafts)),
        key=lambda item: item[:3],
    )
    for email_id, (*_, draft) in enumerate(ordered, start=1):
        draft.email_id = email_id
    return boxes, facts


class _Parser(argparse.ArgumentParser):
    """Argument errors in one line, exit status 2 (argparse's own prints the usage first)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {message}\n")


def main(argv: Sequence[str] | None = None) -> None:
    """Command-line entry: write a store and print what it holds; bad input is one line and exit 2."""
    parser = _Parser(description="Write the email agent's synthetic inbox to a SQLite file.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mailboxes", type=int, default=InboxConfig.mailboxes)
    parser.add_argument("--emails-per-mailbox", type=int, default=InboxConfig.emails_per_mailbox)
    parser.add_argument("--val-mailboxes", type=int, default=InboxConfig.val_mailboxes)
    parser.add_argument("--out", default="inbox.sqlite")
    args = parser.parse_args(argv)
    try:
        config = InboxConfig(args.seed, args.mailboxes, args.emails_per_mailbox, args.val_mailboxes)
        inbox = Inbox.build(config, args.out)
    except EmailAgentInputError as exc:
        parser.exit(2, f"error: {exc}\n")
    counts = {d: len(inbox.questions(difficulty=d)) for d in DIFFICULTIES}
    print(
        f"{args.out}: {inbox.count()} emails in {len(inbox.mailboxes)} mailboxes; "
        f"{len(inbox.questions('train'))} train and {len(inbox.questions('val'))} val questions "
        f"({', '.join(f'{n} {d}' for d, n in counts.items())})"
    )
    inbox.close()


if __name__ == "__main__":
    main()
