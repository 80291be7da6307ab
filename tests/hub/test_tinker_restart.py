"""What the Tinker API trains is an ordinary part of `art serve`'s record: after the server restarts on the
same folder, the model's named checkpoints are still listed, a training client made from a saved state
starts from it, and a sampler path still samples; the OpenAI routes serve the step by the record's name."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

pytest.importorskip("torch", reason="needs the `local` extra: pip install -e '.[local]'")
pytest.importorskip("tinker", reason="needs the `dev` extra (tinker==0.38): pip install -e '.[dev]'")

import tinker
from helpers_serve import start_serve
from tinker import types

pytestmark = pytest.mark.slow
TOKENS = [5, 17, 42, 99, 7, 7, 7, 3]


def datum() -> types.Datum:
    return types.Datum(
        model_input=types.ModelInput.from_ints(TOKENS[:-1]),
        loss_fn_inputs={"target_tokens": TOKENS[1:], "weights": [1.0] * (len(TOKENS) - 1)},
    )


def test_a_restarted_server_keeps_what_the_tinker_api_trained(tiny_model_path: Path, tmp_path: Path) -> None:
    folder = tmp_path / "serve"
    server = start_serve(folder, "--device", "cpu", log_name="tinker-restart")
    try:
        with tinker.ServiceClient(base_url=server.url, api_key=server.key) as service:
            training = service.create_lora_training_client(base_model=str(tiny_model_path), rank=4).result()
            training.forward_backward([datum()], "cross_entropy").result()
            training.optim_step(types.AdamParams(learning_rate=1e-2)).result()
            state = training.save_state("kept").result().path
            sampler = training.save_weights_for_sampler("kept").result().path
            before = training.forward([datum()], "cross_entropy").result().loss_fn_outputs[0]["logprobs"]
            model_id = training.model_id
    finally:
        server.stop()
    server = start_serve(folder, "--device", "cpu", port=server.port, log_name="tinker-restart")
    try:
        rest = tinker.RestClient(base_url=server.url, api_key=server.key)
        listed = {c.tinker_path for c in rest.list_checkpoints(model_id).result().checkpoints}
        assert listed == {state, sampler}
        with tinker.ServiceClient(base_url=server.url, api_key=server.key) as service:
            again = service.create_training_client_from_state(state).result()
            after = again.forward([datum()], "cross_entropy").result().loss_fn_outputs[0]["logprobs"]
            assert after.tolist() == pytest.approx(before.tolist(), abs=1e-5)
            sampling = service.create_sampling_client(model_path=sampler).result()
            out = sampling.sample(
                types.ModelInput.from_ints(TOKENS[:3]), 1, types.SamplingParams(max_tokens=3)
            )
            assert len(out.result().sequences[0].tokens) >= 1
        name = model_id.replace(":train:", "-train-")
        listed_models = httpx.get(
            f"{server.url}/v1/models", headers={"Authorization": f"Bearer {server.key}"}, timeout=30
        ).json()
        assert f"{name}@1" in {m["id"] for m in listed_models["data"]}
    finally:
        server.stop()
