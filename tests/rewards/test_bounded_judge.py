"""A judge that cannot write JSON on its own (a random-weight tiny model, served by our engine) still scores
every trajectory once it asks for the bounded answer: the grammar does what the model cannot."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="needs the `local` extra: pip install -e '.[local]'")

from helpers_server import KEY, Served, serve_tiny

import art
from art.rewards import JudgeAnswerError, ruler_score_group
from art.rewards.judge import Judge, RetryPolicy


@pytest.fixture(scope="module")
def served(tiny_model_path: Path) -> Iterator[Served]:
    s = serve_tiny(tiny_model_path, "tiny-judge", max_model_len=2048)
    yield s
    s.close()


def group() -> art.TrajectoryGroup:
    return art.TrajectoryGroup(
        art.Trajectory(
            messages_and_choices=[
                {"role": "user", "content": "Name a colour."},
                {"role": "assistant", "content": colour},
            ],
            reward=0.0,
        )
        for colour in ("red", "blue", "green", "teal")
    )


def judge(served: Served, **fields: object) -> Judge:
    return Judge(
        model="tiny-judge",
        base_url=served.url,
        api_key=KEY,
        params={"temperature": 1.0, "max_tokens": 400, "seed": 3},
        retry=RetryPolicy(max_attempts=1, max_invalid_answers=0),
        **fields,  # type: ignore[arg-type]
    )


async def test_a_rambling_judge_scores_every_trajectory_with_the_bounded_answer(served: Served) -> None:
    # Unbounded, its explanations run until max_tokens cuts the JSON: no usable answer.
    with pytest.raises(JudgeAnswerError):
        await ruler_score_group(group(), judge(served), cache=False)
    scored = await ruler_score_group(group(), judge(served, max_explanation_chars=24), cache=False)
    assert scored is not None
    assert len(scored.trajectories) == 4
    for t in scored.trajectories:
        assert 0.0 <= t.reward <= 1.0
        assert t.metrics["ruler_score"] == t.reward


@pytest.fixture(scope="module")
def served_4k(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A judge with a 4,096-token context: room for the instructions and a cut group, not a whole one."""
    from art.testing.tiny_model import make_tiny_model

    path = make_tiny_model(tmp_path_factory.mktemp("tiny-judge-4k"), max_position_embeddings=4096)
    s = serve_tiny(path, "tiny-judge", max_model_len=4096)
    yield s
    s.close()


def long_group() -> art.TrajectoryGroup:
    """Four trajectories, each with a tool result of about 6,000 characters: far past a 2,048-token judge."""
    rows = " ".join(f"row {i}: value {i * 7 % 1000}" for i in range(400))
    return art.TrajectoryGroup(
        art.Trajectory(
            messages_and_choices=[
                {"role": "user", "content": "Which row has the largest value?"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "table", "arguments": "{}"}}
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": f"{rows} (reading {k})"},
                {"role": "assistant", "content": answer},
            ],
            reward=0.0,
        )
        for k, answer in enumerate(("row 142", "row 3", "I do not know", "row 285"))
    )


async def test_a_group_longer_than_the_judges_context_is_cut_to_fit(
    served_4k: Served, caplog: pytest.LogCaptureFixture
) -> None:
    served = served_4k
    # Our server refuses the whole group (context_length_exceeded, with its numbers); RULER cuts the tool
    # results to what those numbers leave room for and asks again.
    with caplog.at_level("WARNING", logger="art.rewards"):
        scored = await ruler_score_group(long_group(), judge(served, max_explanation_chars=24), cache=False)
    assert scored is not None and len(scored.trajectories) == 4
    assert all(0.0 <= t.reward <= 1.0 for t in scored.trajectories)
    assert any("context is too small for this group" in r.getMessage() for r in caplog.records)
    # The trajectories themselves are untouched: only the judge's copy was cut.
    assert all(len(t.messages_and_choices[2]["content"]) > 5000 for t in scored.trajectories)  # type: ignore[index]

    # The same judge's next group starts from the budget that fit: cut before it is sent, never refused
    # (each refusal logs the warning).
    caplog.clear()
    with caplog.at_level("WARNING", logger="art.rewards"):
        again = await ruler_score_group(long_group(), judge(served, max_explanation_chars=24), cache=False)
    assert again is not None and len(again.trajectories) == 4
    assert not any("context is too small" in r.getMessage() for r in caplog.records)

    # With max_prompt_chars the prompt is cut before it is sent: no refusal, no warning.
    caplog.clear()
    with caplog.at_level("WARNING", logger="art.rewards"):
        fitted = judge(served, max_explanation_chars=24, max_prompt_chars=4500)
        assert await ruler_score_group(long_group(), fitted, cache=False) is not None
    assert not any("context is too small" in r.getMessage() for r in caplog.records)
