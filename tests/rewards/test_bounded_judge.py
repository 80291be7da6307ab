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
