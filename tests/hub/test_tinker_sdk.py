"""The official `tinker` SDK (0.38, unchanged) against a real `art serve` on a tiny model (docs/tinker.md):
every call the SDK makes for training and sampling, the RestClient's listings, and what is refused.

One server for the module; the tour runs its calls in order on one training client (each call is cheap on
the tiny model; `art serve` is what costs: about 10 s to start)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="needs the `local` extra: pip install -e '.[local]'")
pytest.importorskip("tinker", reason="needs the `dev` extra (tinker==0.38): pip install -e '.[dev]'")

import tinker
from helpers_serve import ServeProcess, start_serve
from tinker import types


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, tiny_model_path: Path) -> Iterator[ServeProcess]:
    server = start_serve(tmp_path_factory.mktemp("tinker") / "serve", "--device", "cpu")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def service(served: ServeProcess) -> Iterator[tinker.ServiceClient]:
    with tinker.ServiceClient(base_url=served.url, api_key=served.key) as client:  # finishes the session
        yield client


def datum(tokens: list[int], weights: list[float] | None = None) -> types.Datum:
    """Next-token prediction on `tokens`: input tokens[:-1], targets tokens[1:]."""
    inputs, targets = tokens[:-1], tokens[1:]
    return types.Datum(
        model_input=types.ModelInput.from_ints(inputs),
        loss_fn_inputs={"target_tokens": targets, "weights": weights or [1.0] * len(targets)},
    )


TOKENS = [5, 17, 42, 99, 7, 7, 7, 3]


def test_key_is_for_the_sdk(served: ServeProcess, tiny_model_path: Path) -> None:
    assert served.key.startswith("tml-")  # the SDK refuses any other key before sending
    wrong = tinker.ServiceClient(base_url=served.url, api_key="tml-wrong-key-0123456789")
    with pytest.raises(tinker.AuthenticationError):
        wrong.create_lora_training_client(base_model=str(tiny_model_path), rank=4)


def test_the_sdk_trains_samples_and_saves(
    service: tinker.ServiceClient, served: ServeProcess, tiny_model_path: Path
) -> None:
    base = str(tiny_model_path)
    training = service.create_lora_training_client(base_model=base, rank=4).result()
    assert training.get_info().model_data.model_name == base
    before = training.forward([datum(TOKENS)], "cross_entropy").result()
    assert len(before.loss_fn_outputs[0]["logprobs"].tolist()) == len(TOKENS) - 1
    losses = []
    for _ in range(3):
        result = training.forward_backward([datum(TOKENS)], "cross_entropy").result()
        losses.append(result.metrics["loss:sum"])
        step = training.optim_step(types.AdamParams(learning_rate=1e-2)).result()
        assert math.isfinite(step.metrics["grad_norm:mean"])
    assert losses[-1] < losses[0], losses  # it learns the sequence
    state = training.save_state("s1").result()
    assert state.path.endswith("/weights/s1")
    sampler_path = training.save_weights_for_sampler("w1").result().path
    sampler = service.create_sampling_client(model_path=sampler_path).result()
    out = sampler.sample(
        prompt=types.ModelInput.from_ints(TOKENS[:3]),
        num_samples=2,
        sampling_params=types.SamplingParams(max_tokens=4, temperature=1.0, seed=1),
    ).result()
    assert len(out.sequences) == 2
    for seq in out.sequences:
        assert len(seq.tokens) == len(seq.logprobs) and 1 <= len(seq.tokens) <= 4
        assert all(lp <= 0 for lp in seq.logprobs)
    fresh = training.save_weights_and_get_sampling_client().result()
    prompt_lps = fresh.compute_logprobs(types.ModelInput.from_ints(TOKENS)).result()
    assert prompt_lps[0] is None and len(prompt_lps) == len(TOKENS)
    trained = training.forward([datum(TOKENS)], "cross_entropy").result()
    assert prompt_lps[1:] == pytest.approx(trained.loss_fn_outputs[0]["logprobs"].tolist(), abs=0.05)

    # the record: every optim_step is a checkpoint, served by the OpenAI routes
    record = served.path / "tinker" / "models" / training.model_id.replace(":train:", "-train-")
    assert sorted(p.name for p in (record / "checkpoints").iterdir() if p.name.isdigit())[-1] == "0003"
    names = json.loads((record / "tinker.json").read_text())["checkpoints"]
    assert names["weights/s1"]["step"] == 3 and names["sampler_weights/w1"]["step"] == 3

    rest = tinker.RestClient(base_url=served.url, api_key=served.key)
    listed = rest.list_checkpoints(training.model_id).result().checkpoints
    assert {c.checkpoint_id for c in listed} == {"weights/s1", "sampler_weights/w1"}
    caps = rest.get_server_capabilities().result()
    assert base in [m.model_name for m in caps.supported_models]

    # load_state: checkpoint s1 becomes the next step; a client made from it starts there
    again = service.create_training_client_from_state(state.path).result()
    copy = again.forward([datum(TOKENS)], "cross_entropy").result()
    assert copy.loss_fn_outputs[0]["logprobs"].tolist() == pytest.approx(
        trained.loss_fn_outputs[0]["logprobs"].tolist(), abs=1e-5
    )
