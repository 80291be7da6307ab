"""The reference's `PipelineTrainer` on the real stack (LocalBackend: engine, server on 127.0.0.1, trainer):
every request of a rollout is answered by the step the rollout began on, steps train and are logged,
evaluations run on their step, and LocalBackend's leases keep a step in use from deletion."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import art
from art.local import LocalBackend
from art.pipeline_trainer import PipelineTrainer, keep_recent_and_top, make_group_rollout_fn

PROMPT = [{"role": "user", "content": "Puzzle 1. Clue 1: the person is Plum.\nA. Who did it?"}]


async def one_turn(
    model: art.TrainableModel, scenario: dict[str, Any], config: dict[str, Any]
) -> art.Trajectory:
    """Two requests, like a multi-turn agent; the server's checkpoint step of each is kept."""
    client = model.openai_client()
    served: list[int] = []
    trajectory = art.Trajectory(messages_and_choices=list(PROMPT))
    for _ in range(2):
        response = await client.chat.completions.create(
            model=model.get_inference_name(), messages=trajectory.messages(), max_tokens=4, temperature=1.0
        )
        choice = response.choices[0]
        served.append((choice.model_extra or {})["checkpoint_step"])
        trajectory.messages_and_choices.append(choice)
        trajectory.messages_and_choices.append({"role": "user", "content": "Again."})
    trajectory.messages_and_choices.pop()
    config["served"].append(served)
    trajectory.metadata["served"] = ",".join(map(str, served))
    trajectory.reward = float(len(config["served"]) % 3)  # rewards differ within a group
    return trajectory


async def test_pipeline_trainer_on_the_local_backend(compat_model_path: Path, tmp_path: Path) -> None:
    model = art.TrainableModel(name="pipe", project="compat", base_model=str(compat_model_path))
    config: dict[str, Any] = {"served": []}
    evaluated: list[tuple[int, list[int]]] = []

    async def evaluate(model: art.TrainableModel, step: int, config: dict[str, Any]) -> list[art.Trajectory]:
        trajectory = await one_turn(model, {}, config)
        evaluated.append((step, [int(s) for s in str(trajectory.metadata["served"]).split(",")]))
        return [trajectory]

    async with LocalBackend(path=str(tmp_path), progress=False) as backend:
        await model.register(backend)
        trainer = PipelineTrainer(
            model, backend, make_group_rollout_fn(one_turn, n=3), [{"i": i} for i in range(40)], config,
            evaluate, num_rollout_workers=2, min_batch_size=2, max_batch_size=2, max_steps_off_policy=1,
            max_steps=3, learning_rate=1e-3, eval_every_n_steps=2, show_progress=False,
            checkpoint_retention_strategy=keep_recent_and_top(recent=0, top=1),
        )  # fmt: skip
        await trainer.train(handle_signals=False)
        assert await model.get_step() == 3

        trained = [model.storage.read_groups("train", step) for step in (1, 2, 3)]
        for step, groups in enumerate(trained, start=1):
            assert len(groups) == 2
            for group in groups:
                for t in group.trajectories:
                    # every request of the rollout was answered by the step it began on
                    assert t.metadata["served"] == f"{t.initial_policy_version},{t.initial_policy_version}"
                    assert step - 2 <= t.initial_policy_version <= step - 1  # type: ignore[operator]
        assert evaluated == [(0, [0, 0]), (2, [2, 2])]
        history = model.history()
        assert [r["step"] for r in history if "loss/train" in r] == [1, 2, 3]
        assert {r["step"]: r["val/reward"] for r in history if "val/reward" in r}.keys() == {0, 2}
        # retention kept the newest step and the best evaluated one; the others went
        kept = model.storage.checkpoint_steps()
        assert 3 in kept and set(kept) - {3} <= {0, 2} and len(kept) <= 3

        # LocalBackend's leases: a step in use survives delete_checkpoints; prune unloads, disk stays
        newest = await model.get_step()
        older = min(kept)
        async with backend.adapter_lease(model, older):
            assert model.get_inference_name() == f"pipe@{older}"
            await backend._delete_checkpoint_files(model, [])
            assert model.storage.checkpoint_steps() == sorted({older, newest})
        assert model.get_inference_name() == f"pipe@{newest}"
        async with backend.adapter_retention_lease(model, older):  # holds the step, pins nothing
            assert model.get_inference_name() == f"pipe@{newest}"
            await backend._delete_checkpoint_files(model, [])
            assert model.storage.checkpoint_steps() == sorted({older, newest})
        unloaded = await backend.prune_model_adapters(model, retain_steps=set())
        assert newest not in unloaded
        service = backend.service(model)
        assert service.adapters is not None and service.adapters.loaded_steps == [newest]
        await backend.delete_checkpoints(model, [])
        assert model.storage.checkpoint_steps() == [newest]
