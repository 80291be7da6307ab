"""`art serve`'s serverless routes (`/v1/preview/`, the reference's training API) driven by our own
`art.ServerlessBackend`, the reference's class: register, sample under the reference's artifact names,
train, log, list and delete checkpoints; what the routes refuse, they refuse clearly. (The reference's own
client against the same routes: tests/compat/test_reference_serverless.py.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

pytest.importorskip("torch", reason="needs the `local` extra: pip install -e '.[local]'")

from helpers_serve import ServeProcess, start_serve

import art
from art.serverless.client import ServerlessAPIError

PROMPT = [{"role": "user", "content": "Say a number."}]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, tiny_model_path: Path) -> Iterator[ServeProcess]:
    server = start_serve(tmp_path_factory.mktemp("serverless") / "serve", "--device", "cpu")
    yield server
    server.stop()


async def rollout(model: art.TrainableModel, seed: int) -> art.Trajectory:
    response = await model.openai_client().chat.completions.create(
        model=model.get_inference_name(),
        messages=PROMPT,
        max_tokens=4,
        seed=seed,  # type: ignore[arg-type]
    )
    return art.Trajectory(messages_and_choices=[*PROMPT, response.choices[0]], reward=float(seed % 2))


@pytest.mark.slow
async def test_serverless_backend_trains_through_art_serve(
    served: ServeProcess, tiny_model_path: Path, tmp_path: Path
) -> None:
    backend = art.ServerlessBackend(api_key=served.key, base_url=f"{served.url}/v1")
    model = art.TrainableModel(
        name="sl", project="slp", base_model=str(tiny_model_path), base_path=str(tmp_path)
    )
    await model.register(backend)
    assert (model.id, model.entity) == ("slp:sl", "local")
    assert model.inference_model_name == "wandb-artifact:///local/slp/sl"
    assert await model.get_step() == 0
    for step in (1, 2):
        groups = [art.TrajectoryGroup([await rollout(model, 10 * g + i) for i in range(2)]) for g in range(2)]
        result = await backend.train(model, groups, learning_rate=1e-3, loss_fn="ppo")
        await model.log(groups, metrics=result.metrics, step=result.step, split="train")
        assert result.step == step and result.artifact_name == f"local/slp/sl:step{step}"
        assert result.metrics["data/step_num_groups_submitted"] == 2 and "loss/train" in result.metrics
    assert [row["step"] for row in model.history()] == [1, 2]
    async with backend.adapter_lease(model, 1):  # rollouts pinned to step 1, by its artifact name
        assert model.get_inference_name() == "wandb-artifact:///local/slp/sl:step1"
        answer = await model.openai_client().chat.completions.create(
            model=model.get_inference_name(), messages=PROMPT, max_tokens=2
        )
        assert answer.model == "sl@1"
    assert await model.delete_checkpoints() == [2]
    info = httpx.get(
        f"{served.url}/v1/art/models/slp/sl/checkpoints", headers={"Authorization": f"Bearer {served.key}"}
    )
    assert [c["step"] for c in info.json()["data"]] == [2]  # our own API sees the same model
    await backend._client.log(model_id="slp:sl", trajectory_groups=groups, split="val")
    assert (served.path / "slp" / "models" / "sl" / "trajectories" / "val" / "0002.jsonl").exists()

    with pytest.raises(TypeError, match="learning_rte"):  # a typo fails before anything is sent
        await backend.train(model, groups, learning_rte=1e-3)
    bad = {"model_id": "slp:sl", "trajectory_groups": [{"trajectories": [{"reward": "x"}]}]}
    with pytest.raises(ServerlessAPIError, match=r"422.*trajectory_groups\[0\]"):
        await backend._client._call("POST", "preview/training-jobs", json=bad)
    with pytest.raises(ServerlessAPIError, match=r"409.*does not delete models"):
        await backend._client._call("DELETE", "preview/models/slp:sl")
    with pytest.raises(ServerlessAPIError, match="404"):
        await backend._client._call("GET", "preview/models/nope:none/checkpoints")
    with pytest.raises(ServerlessAPIError, match=r"409.*never deleted"):
        await backend._client.delete_checkpoints(model_id="slp:sl", steps=[2])
    with pytest.raises(NotImplementedError, match=r"art.LocalBackend .*model.train_sft"):
        await backend.train_sft(model, [])  # the way that works: art serve trains RL only
    await backend.close()


async def test_the_serverless_routes_need_the_key(served: ServeProcess) -> None:
    async with httpx.AsyncClient() as http:
        response = await http.post(f"{served.url}/v1/preview/models", json={"project": "p", "name": "n"})
    assert response.status_code == 401
