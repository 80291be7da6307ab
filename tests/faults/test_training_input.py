"""Training input is checked when a step is asked for (issue 41, U3): token ids outside the vocabulary or
not integers, logprobs that are not finite numbers <= 0, hyper-parameters out of range. Each is refused
with the field named (`ValueError` from `backend.train`, 422 from `art serve`) before anything trains."""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

import httpx
from faults_loop import make_model, play_step

import art
from art.hub.app import ServeConfig, build_app
from art.local import LocalBackend
from art.openai_server.http import ServerThread
from art.rollout.training_input import TrainingInputError
from art.types import RuntimeOptions

FAST = RuntimeOptions(dtype="float32", train_compile=False, engine_compile="off")
KEY = "training-input-test-key-0123456789"
CHOICE = "trajectory_groups[0].trajectories[0].messages_and_choices[1]"


def with_choice(groups: list[art.TrajectoryGroup], **changes: Any) -> list[art.TrajectoryGroup]:
    """A copy of `groups` whose first trajectory's Choice has `changes` (token_ids, logprob of token 0)."""
    data = [g.model_dump(mode="json") for g in groups]
    choice = data[0]["trajectories"][0]["messages_and_choices"][1]
    if "token_ids" in changes:
        choice["token_ids"] = [changes["token_ids"], *choice["token_ids"][1:]]
    if "logprob" in changes:
        choice["logprobs"]["content"][0]["logprob"] = changes["logprob"]
    return [art.TrajectoryGroup.model_validate(g) for g in data]


BAD_CHOICES: list[tuple[dict[str, Any], str, str]] = [
    ({"token_ids": 10**6}, f"{CHOICE}.token_ids[0]", "outside this model's vocabulary"),
    ({"token_ids": -1}, f"{CHOICE}.token_ids[0]", "integer >= 0"),
    ({"token_ids": 2**63}, f"{CHOICE}.token_ids[0]", "outside this model's vocabulary"),
    ({"token_ids": None}, f"{CHOICE}.token_ids[0]", "integer >= 0"),
    ({"token_ids": "a"}, f"{CHOICE}.token_ids[0]", "integer >= 0"),
    ({"logprob": math.nan}, f"{CHOICE}.logprobs.content[0].logprob", "finite number <= 0"),
    ({"logprob": math.inf}, f"{CHOICE}.logprobs.content[0].logprob", "finite number <= 0"),
    ({"logprob": -math.inf}, f"{CHOICE}.logprobs.content[0].logprob", "finite number <= 0"),
    ({"logprob": 50.0}, f"{CHOICE}.logprobs.content[0].logprob", "finite number <= 0"),
]
BAD_SPECS: list[tuple[dict[str, Any], str]] = [
    ({"learning_rate": math.inf}, "learning_rate"),
    ({"learning_rate": 1e308}, "learning_rate"),
    ({"adam_betas": [2, 2]}, "adam_betas"),
    ({"weight_decay": 1e308}, "weight_decay"),
    ({"max_grad_norm": math.nan}, "max_grad_norm"),
]


async def test_backend_train_refuses_bad_input_naming_the_field_before_training(
    tiny_model_path: Path, tmp_path: Path
) -> None:
    model = make_model(tmp_path, tiny_model_path)
    async with LocalBackend(progress=False, options=FAST) as backend:
        await model.register(backend)
        groups = await play_step(model, 0, groups=1, size=2)
        for changes, field, problem in BAD_CHOICES:
            with pytest.raises(TrainingInputError) as caught:
                await backend.train(model, with_choice(groups, **changes), learning_rate=1e-2)
            assert caught.value.field == field and problem in str(caught.value), (changes, str(caught.value))
        for spec, field in BAD_SPECS:
            with pytest.raises(ValueError, match=field):
                await backend.train(model, groups, **spec)
        # Nothing trained, nothing committed or set aside; good input still trains.
        assert await model.get_step() == 0 and model.storage.checkpoint_steps() == [0]
        assert model.storage.rejected_checkpoints() == []
        assert (await backend.train(model, groups, learning_rate=1e-2)).step == 1


@pytest.fixture(scope="module")
def serve_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    config = ServeConfig(
        path=tmp_path_factory.mktemp("serve"),
        progress=False,
        options=FAST,
        base_model_roots=(Path(tempfile.gettempdir()),),  # where the tiny model is
    )
    app, _ = build_app(config, api_key=KEY)
    server = ServerThread(app)
    yield server.start().removesuffix("/v1")
    server.close()


async def test_the_training_api_refuses_bad_input_with_422_naming_the_field(
    tiny_model_path: Path, tmp_path: Path, serve_url: str
) -> None:
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    model = make_model(tmp_path, tiny_model_path)
    async with httpx.AsyncClient(base_url=serve_url, headers=headers, timeout=300) as client:
        body = {"project": "faults", "name": "loop", "base_model": str(tiny_model_path)}
        created = await client.post("/v1/art/models", json=body)
        assert created.status_code == 201, created.text
        model.inference_base_url, model.inference_api_key = f"{serve_url}/v1", KEY
        groups = await play_step(model, 0, groups=1, size=2)
        jobs = "/v1/art/models/faults/loop/training-jobs"

        async def submit(groups: list[art.TrajectoryGroup], spec: dict[str, Any]) -> httpx.Response:
            body = {"trajectory_groups": [g.model_dump(mode="json") for g in groups], "spec": spec}
            return await client.post(jobs, content=json.dumps(body, allow_nan=True))

        for changes, field, problem in BAD_CHOICES:
            response = await submit(with_choice(groups, **changes), {"learning_rate": 1e-2})
            assert response.status_code == 422, (changes, response.text[:300])
            error = response.json()["error"]
            assert error["param"] == field and problem in error["message"], (changes, error)
        for spec, field in BAD_SPECS:
            response = await submit(groups, spec)
            assert response.status_code == 422, (spec, response.text[:300])
            assert response.json()["error"]["param"].startswith(f"spec.{field}"), response.text
        # Nothing was queued or trained.
        assert (await client.get(jobs)).json() == []
        assert (await client.get("/v1/art/models/faults/loop")).json()["step"] == 0
