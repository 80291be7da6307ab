"""Tasks for the mailbox agent written offline, from the mailbox's own facts (no generator needed).

`offline_scenarios(seed)` gives tasks of five shapes, easiest first: answer one question; find an email
and move it to a folder; answer two questions at once; count what a folder holds after a move; clean up
every email of one kind. With a generator configured the MCP-RL example uses `art.mcp.generate_scenarios`
instead; these keep it runnable on a machine with no LLM but the one being trained.
"""

from __future__ import annotations

import random
from collections import defaultdict

from art.examples.mcp_rl.mailbox import Fact, build_mailbox

from art.mcp import GeneratedScenario, GeneratedScenarioCollection

KIND_NOUNS = {
    "order": "shipping",
    "flight": "flight booking",
    "meeting": "meeting",
    "wifi": "wifi",
    "sender": "note",
}


def _tasks(facts: list[Fact], rng: random.Random) -> list[GeneratedScenario]:
    by_kind: dict[str, list[Fact]] = defaultdict(list)
    for fact in facts:
        by_kind[fact.kind].append(fact)
    tasks: list[GeneratedScenario] = []
    for fact in facts:
        tasks.append(
            GeneratedScenario(
                task=f"{fact.question} Look it up in my mailbox and report the answer.", difficulty=1
            )
        )
        folder = rng.choice(("important", "archive"))
        tasks.append(
            GeneratedScenario(
                task=f"Find the {KIND_NOUNS[fact.kind]} email about the {fact.entity} and move it to the {folder} "
                "folder. Report which email you moved.",
                difficulty=2,
            )
        )
    for kind, group in by_kind.items():
        first, second = group[0], group[1]
        tasks.append(
            GeneratedScenario(
                task=f"Answer both: {first.question} And: {second.question} Report both answers.",
                difficulty=3,
            )
        )
        tasks.append(
            GeneratedScenario(
                task=f"Move every {KIND_NOUNS[kind]} email to the archive folder, then report how many emails "
                "each folder holds.",
                difficulty=4,
            )
        )
    tasks.append(
        GeneratedScenario(
            task="How many emails are in each folder right now? Report the counts.", difficulty=1
        )
    )
    return tasks


def offline_scenarios(seed: int = 0) -> GeneratedScenarioCollection:
    """Every offline task for the mailbox of `seed`, in a seeded shuffled order (split it for train/val)."""
    _, facts = build_mailbox(seed)
    rng = random.Random(f"mailbox-tasks:{seed}")
    return GeneratedScenarioCollection(_tasks(facts, rng)).shuffle(seed)
