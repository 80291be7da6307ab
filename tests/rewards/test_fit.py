"""Cutting a group to fit the judge's context: which texts are cut, by how much, and what the judge sees."""

from __future__ import annotations

import copy

import pytest

from art.rewards.fit import CUT_NOTE, budget_after_overflow, cut_contents, cut_text


def test_a_cut_text_keeps_its_beginning_and_end_and_says_how_much_is_gone() -> None:
    text = "BEGIN" + "x" * 1000 + "END"
    cut = cut_text(text, 100)
    assert cut.startswith("BEGIN") and cut.endswith("END")
    assert CUT_NOTE.format(n=len(text) - 100) in cut
    assert cut_text("short", 100) == "short"


def test_tool_results_are_cut_first_and_the_longest_most() -> None:
    lists = [
        [
            {"role": "user", "content": "u" * 3000},
            {"role": "tool", "tool_call_id": "a", "content": "t" * 6000},
        ],
        [{"role": "tool", "tool_call_id": "b", "content": "s" * 2000}],
    ]
    before = copy.deepcopy(lists)
    out, removed = cut_contents(lists, 3000)
    assert lists == before, "the input is not changed"
    assert removed >= 3000
    assert out[0][0]["content"] == "u" * 3000, "tool results alone could lose enough: the user text stays"
    long_tool, short_tool = len(out[0][1]["content"]), len(out[1][0]["content"])
    assert long_tool < 6000 - 2500 and short_tool == 2000, "levelled from the top: the longest lost it all"


def test_other_messages_are_cut_when_tool_results_are_not_enough() -> None:
    lists = [
        [{"role": "user", "content": "u" * 5000}, {"role": "tool", "tool_call_id": "a", "content": "t" * 900}]
    ]
    out, removed = cut_contents(lists, 4000, min_kept=200)
    assert removed >= 4000
    assert len(out[0][1]["content"]) < 300, "the tool result went down to the minimum first"
    assert 1500 < len(out[0][0]["content"]) < 1700, "then the user text lost the rest"


def test_nothing_goes_under_the_minimum_and_the_shortfall_is_reported() -> None:
    lists = [[{"role": "user", "content": "a" * 240}, {"role": "assistant", "content": None}]]
    out, removed = cut_contents(lists, 10_000, min_kept=200)
    assert removed == 0 and out == lists, "240 characters cannot lose 40 and a note"
    out, removed = cut_contents([[{"role": "user", "content": "a" * 1000}]], 10_000, min_kept=200)
    assert 0 < removed < 800 and len(out[0][0]["content"]) == 1000 - removed


@pytest.mark.parametrize(
    ("error", "reserve", "expected"),
    [
        # our server and OpenAI: prompt tokens only
        ("This model's maximum context length is 2048 tokens. However, your messages resulted in 4096 tokens "
         "(at least one token must be left to generate).", 48, int(10_000 * (2048 - 48) / 4096 * 0.9)),
        # vLLM: the prompt's share of what was requested
        ("This model's maximum context length is 8192 tokens. However, you requested 9000 tokens "
         "(8000 in the messages, 1000 in the completion).", 1000, int(10_000 * (8192 - 1000) / 8000 * 0.9)),
        ("prompt is too long", 48, 6000),  # no numbers: 40% shorter
    ],
)  # fmt: skip
def test_the_next_budget_follows_the_endpoints_numbers(error: str, reserve: int, expected: int) -> None:
    assert budget_after_overflow(10_000, error, reserve_tokens=reserve) == expected
