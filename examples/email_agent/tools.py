"""The agent's tools: OpenAI function schemas (`TOOLS`) and `run_tool`, which executes one call on the store.

- `search_emails(keywords, from_address?, sent_after?, sent_before?)`: up to `max_results` emails of the
  question's mailbox matching any keyword, best first, one line each (id, date, sender, subject, snippet);
- `read_email(id)`: one whole email;
- `return_final_answer(answer, source_ids)`: the short answer and the ids of the emails it came from; it
  ends the episode.

A call that is not well formed (an unknown tool, arguments that are not a JSON object, a missing, unknown
or ill-typed argument, a date that is not YYYY-MM-DD) gets an error string as its result, as a real tool
would answer, and counts as malformed. An id that does not exist in the mailbox (read, or cited as a
source) is a well-formed call whose id is counted as nonexistent (`ToolOutcome.missing_ids`): reading it
returns an error string, citing it is accepted and penalised by the reward.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .inbox import Email, Inbox, SearchHit, parse_date

TOOL_NAMES = ("search_emails", "read_email", "return_final_answer")


def _function(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            },
        },
    }


TOOLS: list[dict[str, Any]] = [
    _function(
        "search_emails",
        "Search the inbox. Returns matching emails (id, date, sender, subject, snippet), best first.",
        {
            "keywords": {"type": "string", "description": "words to look for"},
            "from_address": {"type": "string", "description": "only emails whose sender contains this"},
            "sent_after": {"type": "string", "description": "only emails sent on or after YYYY-MM-DD"},
            "sent_before": {"type": "string", "description": "only emails sent on or before YYYY-MM-DD"},
        },
        ["keywords"],
    ),
    _function("read_email", "Read one email by its id.", {"id": {"type": "integer"}}, ["id"]),
    _function(
        "return_final_answer",
        "Give the short answer and the ids of the emails it comes from. This ends the task.",
        {
            "answer": {"type": "string", "description": "the answer, a few words"},
            "source_ids": {"type": "array", "items": {"type": "integer"}},
        },
        ["answer", "source_ids"],
    ),
]
"""The tools as OpenAI function definitions (what the model is shown)."""

_SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}


@dataclass
class ToolOutcome:
    """What one call returned and what it tells the scorer."""

    content: str  # the tool message's content: results, an email, or an error sentence
    malformed: bool = False  # unknown tool, bad JSON, missing/unknown/ill-typed argument, bad date
    hit_ids: list[int] = field(default_factory=list)  # search results, best first
    read_id: int | None = None  # the email read
    missing_ids: list[int] = field(default_factory=list)  # ids read or cited that the mailbox lacks
    final: bool = False  # return_final_answer was accepted: the episode ends
    answer: str | None = None
    source_ids: list[int] = field(default_factory=list)


def format_hits(hits: list[SearchHit]) -> str:
    """Search results as the tool returns them: one line per email."""
    if not hits:
        return "no emails found"
    return "\n".join(
        f"id: {h.id} | date: {h.date} | from: {h.sender} | subject: {h.subject} | {h.snippet}" for h in hits
    )


def format_email(email: Email) -> str:
    """An email as `read_email` returns it: headers, a blank line, the body."""
    return (
        f"id: {email.id}\nfrom: {email.sender}\nto: {email.recipient}\ndate: {email.date}\n"
        f"subject: {email.subject}\n\n{email.body}"
    )


def _type_error(name: str, key: str, value: Any, spec: dict[str, Any]) -> str | None:
    """Why `value` does not fit the argument's schema, or None when it does."""
    kind = spec.get("type")
    if kind == "string" and not isinstance(value, str):
        return f"error: {name}: '{key}' must be a string, got {json.dumps(value)}"
    if kind == "integer" and (isinstance(value, bool) or not isinstance(value, int)):
        return f"error: {name}: '{key}' must be an integer, got {json.dumps(value)}"
    if kind == "array" and (
        not isinstance(value, list) or any(isinstance(v, bool) or not isinstance(v, int) for v in value)
    ):
        return f"error: {name}: '{key}' must be a list of integer email ids, got {json.dumps(value)}"
    return None


def check_arguments(name: str, arguments: str) -> tuple[dict[str, Any], str | None]:
    """Parse and check a call's arguments against its tool's schema: (arguments, None) or ({}, error)."""
    if name not in _SCHEMAS:
        return {}, f"error: unknown tool {name!r}; use one of {', '.join(TOOL_NAMES)}"
    try:
        args = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError:
        return {}, f"error: {name}: the arguments are not valid JSON: {arguments[:80]}"
    if not isinstance(args, dict):
        return {}, f"error: {name}: the arguments must be a JSON object, got {arguments[:80]}"
    schema = _SCHEMAS[name]
    unknown = sorted(set(args) - set(schema["properties"]))
    if unknown:
        return (
            {},
            f"error: {name}: unknown argument {unknown[0]!r}; it takes {', '.join(schema['properties'])}",
        )
    missing = [key for key in schema["required"] if key not in args]
    if missing:
        return {}, f"error: {name}: missing argument {missing[0]!r}"
    for key, value in args.items():
        problem = _type_error(name, key, value, schema["properties"][key])
        if problem:
            return {}, problem
    return args, None


def run_tool(inbox: Inbox, mailbox: str, name: str, arguments: str, max_results: int = 5) -> ToolOutcome:
    """Execute one call (its arguments as the API's JSON string) on `mailbox`; bad calls get an error."""
    args, error = check_arguments(name, arguments)
    if error:
        return ToolOutcome(error, malformed=True)
    if name == "search_emails":
        dates = {key: args.get(key) for key in ("sent_after", "sent_before")}
        for key, value in dates.items():
            if value is not None and parse_date(value) is None:
                return ToolOutcome(
                    f"error: search_emails: '{key}' must be a date YYYY-MM-DD, got {value!r}", True
                )
        if not args["keywords"].strip():
            return ToolOutcome(
                "error: search_emails: 'keywords' is empty; give a few words to look for", True
            )
        hits = inbox.search(
            mailbox,
            args["keywords"],
            from_address=args.get("from_address"),
            sent_after=dates["sent_after"],
            sent_before=dates["sent_before"],
            limit=max_results,
        )
        return ToolOutcome(format_hits(hits), hit_ids=[h.id for h in hits])
    if name == "read_email":
        email = inbox.email(args["id"], mailbox)
        if email is None:
            return ToolOutcome(
                f"error: no email with id {args['id']} in this inbox", missing_ids=[args["id"]]
            )
        return ToolOutcome(format_email(email), read_id=email.id)
    answer, sources = args["answer"].strip(), list(dict.fromkeys(args["source_ids"]))
    if not answer:
        return ToolOutcome("error: return_final_answer: 'answer' is empty", malformed=True)
    missing = [i for i in sources if inbox.email(i, mailbox) is None]
    return ToolOutcome("answer recorded", final=True, answer=answer, source_ids=sources, missing_ids=missing)
