"""The reference's own client against `art serve`: OpenPipe's `ServerlessBackend(base_url=...)` (openpipe-art
0.5.23 from PyPI, in its own venv) registers a model on a real `art serve`, samples from it, trains two
steps with `backend.train`, logs them with its `model.log`, lists and deletes checkpoints, and chats with
each step; `art serve`'s own API still answers for the same model.

The venv is made once by tests/compat/make_reference_venv.sh (~/.cache/art/reference-venv, or
$ART_REFERENCE_VENV; a cold build with no pip cache took 67 s and 856 MB on a 2-core host, 2026-11-26);
without it the test is skipped, saying so. Nothing is installed at test time.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import textwrap
from pathlib import Path

import httpx
import pytest

pytest.importorskip("torch", reason="needs the `local` extra: pip install -e '.[local]'")

from helpers_serve import start_serve

from art.testing.tiny_model import make_tiny_model

REFERENCE_VENV = Path(os.environ.get("ART_REFERENCE_VENV", Path.home() / ".cache" / "art" / "reference-venv"))
REFERENCE_PYTHON = REFERENCE_VENV / "bin" / "python"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not REFERENCE_PYTHON.exists(),
        reason=f"the reference's client is not installed at {REFERENCE_VENV}: run "
        "tests/compat/make_reference_venv.sh (openpipe-art 0.5.23 in its own venv) to run this test",
    ),
]

# Runs in the reference's venv: its `art` package, its ServerlessBackend, its Model.
SCRIPT = textwrap.dedent(
    """
    import asyncio, json, os, sys

    import art
    from art.serverless.backend import ServerlessBackend

    URL, KEY, BASE_MODEL, RECORD = sys.argv[1:5]
    PROMPT = [{"role": "user", "content": "Say a number."}]


    async def rollout(model, step, seed):
        client = model.openai_client()
        response = await client.chat.completions.create(
            model=model.get_inference_name(step=step), messages=PROMPT, max_tokens=4, seed=seed,
            logprobs=True, temperature=1.0,
        )
        choice = response.choices[0]
        return art.Trajectory(messages_and_choices=[*PROMPT, choice], reward=float(seed % 2))


    async def main():
        out = {}
        backend = ServerlessBackend(api_key=KEY, base_url=URL + "/v1")
        model = art.TrainableModel(  # run_name: required in 0.5.23 (its record and W&B name)
            name="ref-agent", run_name="ref-agent", project="refproj", base_model=BASE_MODEL, base_path=RECORD
        )
        await model.register(backend)
        out["id"], out["entity"] = model.id, model.entity
        out["inference_model_name"] = model.inference_model_name
        out["step0"] = await model.get_step()
        for step in (1, 2):
            groups = [
                art.TrajectoryGroup([await rollout(model, None, 10 * g + i) for i in range(2)]) for g in range(2)
            ]
            result = await backend.train(model, groups, learning_rate=1e-3)
            await model.log(groups, metrics=result.metrics, step=result.step, split="train")
            out[f"train{step}"] = {"step": result.step, "metrics": result.metrics}
        answer = await model.openai_client().chat.completions.create(
            model=model.get_inference_name(step=1), messages=PROMPT, max_tokens=3
        )
        out["chat_step1_model"] = answer.model
        out["checkpoints_before"] = [c.step async for c in backend._client.models.checkpoints.list(model_id=model.id)]
        await model.delete_checkpoints()  # keeps the latest (no val/reward logged)
        out["checkpoints_after"] = [c.step async for c in backend._client.models.checkpoints.list(model_id=model.id)]
        out["step_after"] = await model.get_step()
        out["latest_chat_model"] = (await model.openai_client().chat.completions.create(
            model=model.get_inference_name(), messages=PROMPT, max_tokens=2)).model
        await backend.close()
        print("SUMMARY " + json.dumps(out))


    asyncio.run(main())
    """
)


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("serverless-tiny"))


def test_the_reference_serverless_backend_trains_logs_and_chats_through_art_serve(
    tiny_path: Path, tmp_path: Path
) -> None:
    server = start_serve(tmp_path / "serve", "--device", "cpu")
    try:
        env = {k: v for k, v in os.environ.items() if k not in ("WANDB_API_KEY", "PYTHONPATH", "VIRTUAL_ENV")}
        env.update(WANDB_MODE="disabled", WEAVE_DISABLED="true", LITELLM_LOCAL_MODEL_COST_MAP="True")
        record = tmp_path / "reference-record"
        done = subprocess.run(
            [str(REFERENCE_PYTHON), "-c", SCRIPT, server.url, server.key, str(tiny_path), str(record)],
            capture_output=True,
            text=True,
            timeout=1200,
            env=env,
            cwd=tmp_path,
        )
        assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-6000:]}\n{server.logs()[-3000:]}"
        line = next(x for x in done.stdout.splitlines() if x.startswith("SUMMARY "))
        out = json.loads(line.removeprefix("SUMMARY "))

        assert out["id"] == "refproj:ref-agent" and out["entity"] == "local"
        assert out["inference_model_name"] == "wandb-artifact:///local/refproj/ref-agent"
        assert out["step0"] == 0
        assert out["train1"]["step"] == 1 and out["train2"]["step"] == 2
        metrics = out["train1"]["metrics"]
        assert math.isfinite(metrics["loss/train"]) and "loss/grad_norm" in metrics
        assert metrics["data/step_num_groups_submitted"] == 2
        assert out["chat_step1_model"] == "ref-agent@1"  # its artifact name resolved to our step name
        assert out["checkpoints_before"] == [0, 1, 2]
        assert out["checkpoints_after"] == [2] and out["step_after"] == 2
        assert out["latest_chat_model"] in ("ref-agent", "ref-agent@2")

        # its model.log wrote the reference's record on the client side
        history = [
            json.loads(x)
            for x in (record / "refproj" / "models" / "ref-agent" / "history.jsonl").read_text().splitlines()
        ]
        assert [row["step"] for row in history] == [1, 2]
        assert all("train/reward" in row and "loss/train" in row for row in history)
        assert (
            record / "refproj" / "models" / "ref-agent" / "trajectories" / "train" / "0002.parquet"
        ).exists()

        # art serve's own API still answers, for the same model
        headers = {"Authorization": f"Bearer {server.key}"}
        info = httpx.get(f"{server.url}/v1/art/models/refproj/ref-agent", headers=headers, timeout=30).json()
        assert info["step"] == 2 and info["base_model"] == str(tiny_path)
        steps = httpx.get(
            f"{server.url}/v1/art/models/refproj/ref-agent/checkpoints", headers=headers, timeout=30
        )
        assert [c["step"] for c in steps.json()["data"]] == [2]
    finally:
        server.stop()
