"""The reference's tic-tac-toe example, rewritten as close to the original as a rewrite allows.

Original: OpenPipe/ART `examples/tic_tac_toe/tic-tac-toe.py` and `rollout.py`. Same calls in the same
order with the same arguments: `from art.local.backend import LocalBackend`, `LocalBackend()`,
`model.register`, `for i in range(await model.get_step(), STEP)`, `gather_trajectory_groups`,
`model.delete_checkpoints()` (no validation metric logged: a note, then only the latest is kept),
`backend.train(model, train_groups, learning_rate=5e-5)`, `model.log(..., split="train")`. Changed: the
base model (a tiny local one), fewer steps and rollouts, and the hosted services removed (W&B Weave's
`weave.init`/`@weave.op`, S3 pull/push, the Together deployment and the OpenAI benchmarks, all off by
default in the original too).
"""

from __future__ import annotations

import math
import random
from pathlib import Path

import openai
import pytest
from compat_helpers import choice_steps, rewards
from pydantic import BaseModel
from tic_tac_toe_game import (
    SYSTEM_PROMPT,
    apply_agent_move,
    check_winner,
    generate_game,
    get_opponent_move,
    render_board,
)

import art
from art.utils.strip_logprobs import strip_logprobs

STEP = 3  # the original: 50
ROLLOUTS_PER_GROUP = 8  # the original: 96


# ---- rollout.py ----------------------------------------------------------------------------------------
class TicTacToeScenario(BaseModel):
    step: int


@art.retry(exceptions=(openai.LengthFinishReasonError,))
async def rollout(model: art.Model, scenario: TicTacToeScenario) -> art.Trajectory:
    game = generate_game()

    trajectory = art.Trajectory(
        messages_and_choices=[
            {
                "role": "system",
                "content": SYSTEM_PROMPT.format(agent_symbol=game["agent_symbol"]),
            }
        ],
        reward=0,
    )

    move_number = 0
    invalid_move = False

    if game["agent_symbol"] == "o":
        starting_opponent_move = get_opponent_move(game)
        game["board"][starting_opponent_move[0]][starting_opponent_move[1]] = game["opponent_symbol"]

    while check_winner(game["board"]) is None:
        trajectory.messages_and_choices.append({"role": "user", "content": render_board(game)})

        messages = trajectory.messages()

        client = model.openai_client()
        chat_completion = await client.chat.completions.create(
            model=model.get_inference_name(),
            messages=messages,  # type: ignore[arg-type]
            max_completion_tokens=128,
        )

        choice = chat_completion.choices[0]
        content = choice.message.content
        assert isinstance(content, str)
        trajectory.messages_and_choices.append(choice)

        try:
            apply_agent_move(game, content)
        except ValueError:
            invalid_move = True
            trajectory.reward = -100 + (math.log(move_number + 1) / math.log(100))
            break

        move_number += 1
        if check_winner(game["board"]) is not None:
            break

        opponent_move = get_opponent_move(game)
        game["board"][opponent_move[0]][opponent_move[1]] = game["opponent_symbol"]

    winner = check_winner(game["board"])

    if winner == game["agent_symbol"]:
        trajectory.reward = 1
        trajectory.metrics["win"] = 1
    elif winner == game["opponent_symbol"]:
        trajectory.reward = 0
        trajectory.metrics["win"] = 0
    elif winner == "draw":
        trajectory.reward = 0.5
        trajectory.metrics["win"] = 0.5

    trajectory.metrics["num_moves"] = move_number
    trajectory.metrics["invalid_move"] = 1 if invalid_move else 0

    return trajectory


# ---- tic-tac-toe.py ------------------------------------------------------------------------------------
async def main(base_model: str, seen: list[dict[str, object]]) -> art.TrainableModel:
    from art.local.backend import LocalBackend

    backend = LocalBackend()

    model = art.TrainableModel(name="llama-8b-007", project="tic-tac-toe", base_model=base_model)

    print("registering")
    await model.register(backend)

    print("training")
    for i in range(await model.get_step(), STEP):
        served_step = model.get_inference_name()  # (test probe) the name this step's rollouts use
        train_groups = await art.gather_trajectory_groups(
            (
                art.TrajectoryGroup(
                    rollout(model, TicTacToeScenario(step=i)) for _ in range(ROLLOUTS_PER_GROUP)
                )
                for _ in range(1)
            ),
            pbar_desc="gather",
        )
        await model.delete_checkpoints()
        result = await backend.train(model, train_groups, learning_rate=5e-5)
        await model.log(train_groups, metrics=result.metrics, step=result.step, split="train")
        seen.append({"i": i, "name": served_step, "groups": train_groups, "result": result})

    await backend.close()
    return model


async def test_the_reference_tic_tac_toe_loop_runs_and_trains(
    compat_model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # LocalBackend() keeps its record in ./.art, as in the reference
    random.seed(42)
    seen: list[dict[str, object]] = []
    with pytest.warns(UserWarning, match="no logged value of 'val/reward'"):
        model = await main(str(compat_model_path), seen)

    assert [s["i"] for s in seen] == list(range(STEP))
    step = 0
    for s in seen:
        groups, result = s["groups"], s["result"]
        assert isinstance(groups, list) and isinstance(result, art.TrainResult)
        # every turn of this iteration was sampled from the newest step, under its explicit name
        assert s["name"] == f"llama-8b-007@{step}"
        assert set(choice_steps(groups)) == {step}
        assert len(set(rewards(groups))) > 1, "the taught model plays variously: something to learn"
        assert result.step == step + 1 and result.checkpoint_path is not None
        assert Path(result.checkpoint_path) == model.storage.checkpoint_dir(result.step)
        step = result.step
    # delete_checkpoints() before each step kept only the latest; the last step added one more
    assert model.storage.checkpoint_steps() == [STEP - 1, STEP]
    assert model.storage.root.resolve() == tmp_path / ".art" / "tic-tac-toe" / "models" / "llama-8b-007"
    history = model.history()
    assert [e["step"] for e in history] == [1, 2, 3]
    assert all("train/reward" in e and "loss/train" in e for e in history)
    logged = model.storage.read_groups("train", 1)
    assert rewards(logged) == rewards(seen[0]["groups"])  # type: ignore[arg-type]
    # strip_logprobs (the original passes it to weave): a copy without logprobs, the input untouched
    trajectory = logged[0].trajectories[0]
    stripped = strip_logprobs(trajectory)
    assert all(
        getattr(c, "logprobs", None) is None
        for c in stripped.messages_and_choices[1:]
        if not isinstance(c, dict)
    )
    assert trajectory.num_trainable_turns() >= 1
