"""The reference's 2048 example, rewritten as close to the original as a rewrite allows.

Original: OpenPipe/ART `examples/2048/train.py` and `rollout.py`. Same calls in the same order with the
same arguments: a module-level `art.TrainableModel` given `model._internal_config =
art.dev.InternalModelConfig(init_args=art.dev.InitArgs(max_seq_length=8192))` by assignment,
`from art.local import LocalBackend`, `LocalBackend()`, `gather_trajectory_groups(..., after_each=lambda
group: ruler_score_group(group, ..., debug=True, swallow_exceptions=True), pbar_desc="gather",
max_exceptions=10)`, `backend.train(model, train_groups, learning_rate=1e-5)` and `model.log(...)`, with
no `get_step()` call inside the loop. Changed: the base model (a tiny local one), fewer steps and games,
RULER's hosted judge ("openai/o4-mini") replaced by a local OpenAI-compatible judge, and the hosted
services removed (W&B Weave's `@weave.op`, the S3 pull/push).
"""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import openai
import pytest
import requests
from compat_helpers import choice_steps, rewards
from game_2048 import (
    SYSTEM_PROMPT,
    WINNING_VALUE,
    apply_agent_move,
    check_game_finished,
    generate_game,
    max_cell_value,
    render_board,
    total_board_value,
)

import art
from art.rewards import Judge, ruler_score_group

TRAIN_STEPS = 3  # the original: 40
SIMULTANEOUS_GAMES = 6  # the original: 18
ENABLE_RULER = True


# ---- rollout.py ----------------------------------------------------------------------------------------
@art.retry(exceptions=(openai.LengthFinishReasonError, requests.ReadTimeout))
async def rollout(model: art.Model, step: int, is_validation: bool, verbose: bool = False) -> art.Trajectory:
    game = generate_game()

    move_number = 0

    trajectory = art.Trajectory(
        messages_and_choices=[{"role": "system", "content": SYSTEM_PROMPT}],
        metadata={"game_id": game["id"], "step": step, "validation": is_validation},
        reward=0,
    )

    while True:
        trajectory.messages_and_choices.append({"role": "user", "content": render_board(game)})
        if verbose:
            print(render_board(game))

        async def get_completion() -> Any:
            client = model.openai_client()
            return await client.chat.completions.create(
                max_completion_tokens=128,
                messages=trajectory.messages(),  # type: ignore[arg-type]
                model=model.get_inference_name(),
            )

        chat_completion = await get_completion()

        choice = chat_completion.choices[0]
        content = choice.message.content
        assert isinstance(content, str)
        trajectory.messages_and_choices.append(choice)

        try:
            apply_agent_move(game, content)
            if verbose:
                print(content)
            move_number += 1
        except ValueError:
            trajectory.metrics["invalid_move"] = 1
            trajectory.reward = -1
            break

        if check_game_finished(game):
            trajectory.metrics["invalid_move"] = 0
            break

    max_value = max_cell_value(game)
    board_value = total_board_value(game)
    agent_won = max_value == WINNING_VALUE
    trajectory.metrics["max_value"] = max_value
    trajectory.metrics["board_value"] = board_value
    trajectory.metrics["num_moves"] = move_number
    trajectory.metrics["win"] = agent_won

    if agent_won:
        trajectory.reward = 2
    else:
        max_value_reward = (math.log(max_value, 2) - 1) / (math.log(WINNING_VALUE, 2) - 1)
        board_value_reward = (math.log(board_value, 2) - 1) / (math.log(WINNING_VALUE * 16, 2) - 1)
        trajectory.reward = max_value_reward + (board_value_reward * 0.2)

    return trajectory


# ---- train.py ------------------------------------------------------------------------------------------
def declare_model(base_model: str) -> art.TrainableModel:
    """The original's module-level declaration (here a function: the base model is made at test time)."""
    model = art.TrainableModel(name="tutorial-001", project="2048", base_model=base_model)
    model._internal_config = art.dev.InternalModelConfig(
        init_args=art.dev.InitArgs(
            max_seq_length=8192,
        ),
    )
    return model


async def train(model: art.TrainableModel, judge: Judge, seen: list[dict[str, Any]]) -> None:
    from art.local import LocalBackend

    backend = LocalBackend()

    await model.register(backend)

    for i in range(await model.get_step(), TRAIN_STEPS):
        served = model.get_inference_name()  # (test probe) the name this step's rollouts use
        train_groups = await art.gather_trajectory_groups(
            (
                art.TrajectoryGroup(rollout(model, i, is_validation=False) for _ in range(SIMULTANEOUS_GAMES))
                for _ in range(1)
            ),
            after_each=lambda group: (
                ruler_score_group(
                    group,
                    judge,  # the original: "openai/o4-mini"
                    debug=True,
                    swallow_exceptions=True,
                )
                if ENABLE_RULER
                else None
            ),
            pbar_desc="gather",
            max_exceptions=10,
        )

        result = await backend.train(model, train_groups, learning_rate=1e-5)
        await model.log(train_groups, metrics=result.metrics, step=result.step, split="train")
        seen.append({"name": served, "groups": train_groups, "result": result})

    await backend.close()


async def test_the_reference_2048_loop_runs_and_trains_with_ruler(
    compat_model_path: Path, local_judge: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # LocalBackend() keeps its record in ./.art, as in the reference
    monkeypatch.setenv("ART_JUDGE_CACHE_DIR", str(tmp_path / "judge-cache"))
    local_judge.script.reset()
    random.seed(42)
    judge = Judge(model="position", base_url=local_judge.base_url, api_key="local")
    model = declare_model(str(compat_model_path))
    seen: list[dict[str, Any]] = []
    await train(model, judge, seen)

    assert len(seen) == TRAIN_STEPS
    for step, s in enumerate(seen):
        groups, result = s["groups"], s["result"]
        assert len(groups) == 1, "RULER scored the group (a failed judge would have dropped it)"
        trajectories = groups[0].trajectories
        assert len(trajectories) + len(groups[0].exceptions) == SIMULTANEOUS_GAMES
        assert all("ruler_score" in t.metrics and "independent_reward" in t.metrics for t in trajectories)
        assert len(set(rewards(groups))) > 1
        # on-policy without a get_step() call in the loop: every turn came from the newest step
        assert s["name"] == f"tutorial-001@{step}"
        assert set(choice_steps(groups)) == {step}
        assert result.step == step + 1
    assert any(body.get("model") == "position" for body in local_judge.script.requests)
    assert [e["step"] for e in model.history()] == [1, 2, 3]
    assert model.storage.checkpoint_steps() == [0, 1, 2, 3]
