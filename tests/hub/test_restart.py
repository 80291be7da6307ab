"""`kill -9` of `art serve` in the middle of a step, a restart on the same port, and the client going on."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="needs the `local` extra: pip install -e '.[local]'")

import httpx
from helpers_serve import start_serve

import art
from art.remote import RemoteBackend, TrainingJobFailed

PROMPT = [{"role": "user", "content": "Reply with digits."}]


async def play(model: art.TrainableModel, seed: int, groups: int = 2) -> list[art.TrajectoryGroup]:
    async def rollout(i: int) -> art.Trajectory:
        response = await model.openai_client().chat.completions.create(
            model=model.get_inference_name(),
            messages=PROMPT,
            max_tokens=8,
            seed=seed * 100 + i,  # type: ignore[arg-type]
        )
        return art.Trajectory(messages_and_choices=[*PROMPT, response.choices[0]], reward=float(i == 0))

    return await art.gather_trajectory_groups(
        [art.TrajectoryGroup(rollout(i) for i in range(8)) for _ in range(groups)], pbar_desc=None
    )


@pytest.mark.slow
async def test_kill_9_mid_step_then_restart_and_continue(tiny_model_path: Path, tmp_path: Path) -> None:
    server = start_serve(tmp_path / "server")
    model = art.TrainableModel(
        name="crash", project="t", base_model=str(tiny_model_path), base_path=str(tmp_path / "client")
    )
    backend = RemoteBackend(server.url, server.key, reconnect_seconds=600, progress=False)
    try:
        await model.register(backend)
        first = await model.train(await play(model, 1), config=art.TrainConfig(learning_rate=1e-3))
        assert first.step == 1
        # One sequence per micro-batch, 128 of them: a step of seconds even on a fast host, killed after
        # its first micro-batch (with 16 the step could end between the poll and the kill).
        train = asyncio.ensure_future(
            backend.train(model, await play(model, 2, groups=16), learning_rate=1e-3, micro_batch_tokens=8)
        )
        async with httpx.AsyncClient(
            base_url=server.url, headers={"Authorization": f"Bearer {server.key}"}
        ) as client:
            while True:
                jobs = (await client.get("/v1/art/models/t/crash/training-jobs")).json()
                job = jobs[0]
                events = (await client.get(f"/v1/art/training-jobs/{job['id']}/events")).json()["data"]
                if len(jobs) == 2 and any(e["type"] == "progress" for e in events):
                    break
                await asyncio.sleep(0.01)
        assert not any(e["type"] == "checkpoint_saved" for e in events)  # the premise: killed mid-step
        server.kill()
        assert not train.done()  # the client waits through the outage
        server = start_serve(tmp_path / "server", port=server.port, log_name="restarted")
        assert "restored 1 model(s): t/crash" in server.logs()
        with pytest.raises(
            TrainingJobFailed, match=r"server stopped \(killed or crashed\) while it ran"
        ) as failed:
            await train
        assert failed.value.job.id == job["id"] and "resumes from step 1" in str(failed.value)
        # the service resumed from its newest complete checkpoint, and the next step works
        assert await backend.get_step(model) == 1
        again = await backend.train(model, await play(model, 3), learning_rate=1e-3)
        assert again.step == 2
        assert [c.step for c in await backend.list_checkpoints(model)] == [0, 1, 2]
        reply = await model.openai_client().chat.completions.create(
            model="crash@2", messages=PROMPT, max_tokens=2
        )
        assert reply.choices[0].model_extra["checkpoint_step"] == 2  # type: ignore[index]
    finally:
        await backend.close()
        server.stop()
