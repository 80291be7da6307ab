"""The official `tinker` SDK (0.38, unchanged) against a real `art serve` on a tiny model (docs/tinker.md):
the calls the SDK makes for training, sampling and saving, the RestClient's listings, every loss it names
(computed, or refused naming the computed ones), and bad input refused with nothing written.

The server is tests/hub/conftest.py's, shared by tests/hub/test_tinker_*.py; every test makes its own
training models on it."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("torch", reason="needs the `local` extra: pip install -e '.[local]'")
pytest.importorskip("tinker", reason="needs the `dev` extra (tinker==0.38): pip install -e '.[dev]'")

import tinker
import torch
from helpers_serve import ServeProcess
from tinker import types

TOKENS = [5, 17, 42, 99, 7, 7, 7, 3]


def datum(tokens: list[int], **inputs: list[float]) -> types.Datum:
    """Next-token prediction on `tokens` (input tokens[:-1], targets tokens[1:]); weights 1 unless given."""
    targets = tokens[1:]
    given: dict[str, Any] = {"target_tokens": targets, **inputs}
    if not inputs:
        given["weights"] = [1.0] * len(targets)
    return types.Datum(model_input=types.ModelInput.from_ints(tokens[:-1]), loss_fn_inputs=given)


def record_of(served: ServeProcess, model_id: str) -> Path:
    return served.path / "tinker" / "models" / model_id.replace(":train:", "-train-")


def files_of(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) if folder.exists() else []


def test_the_key_is_one_the_sdk_takes(tinker_served: ServeProcess, tiny_model_path: Path) -> None:
    assert tinker_served.key.startswith("tml-")  # the SDK refuses any other key before sending
    wrong = tinker.ServiceClient(base_url=tinker_served.url, api_key="tml-wrong-key-0123456789")
    with pytest.raises(tinker.AuthenticationError):
        wrong.create_lora_training_client(base_model=str(tiny_model_path), rank=4).result()


def test_older_keys_work_with_the_prefix() -> None:
    from art.hub.routes.tinker.shared import TinkerState

    older = TinkerState(hub=None, api_key="art-an-older-key-0123456789")  # type: ignore[arg-type]
    assert older.key_ok("tml-art-an-older-key-0123456789") and not older.key_ok("art-an-older-key-0123456789")
    new = TinkerState(hub=None, api_key="tml-a-new-key-0123456789")  # type: ignore[arg-type]
    assert new.key_ok("tml-a-new-key-0123456789") and not new.key_ok("tml-tml-a-new-key-0123456789")
    assert not new.key_ok(None) and TinkerState(hub=None, api_key=None).key_ok(None)  # type: ignore[arg-type]


def test_the_sdk_trains_samples_saves_and_loads(
    tinker_service: Any, tinker_served: ServeProcess, tiny_model_path: Path
) -> None:
    base = str(tiny_model_path)
    training = tinker_service.create_lora_training_client(base_model=base, rank=4).result()
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
    assert state.path == f"tinker://{training.model_id}/weights/s1"
    sampler_path = training.save_weights_for_sampler("w1").result().path
    sampler = tinker_service.create_sampling_client(model_path=sampler_path).result()
    out = sampler.sample(
        prompt=types.ModelInput.from_ints(TOKENS[:3]),
        num_samples=2,
        sampling_params=types.SamplingParams(max_tokens=4, temperature=1.0, seed=1),
    ).result()
    assert len(out.sequences) == 2
    for seq in out.sequences:
        assert len(seq.tokens) == len(seq.logprobs) and 1 <= len(seq.tokens) <= 4
        assert all(lp <= 0 for lp in seq.logprobs) and seq.stop_reason in ("stop", "length")
    fresh = training.save_weights_and_get_sampling_client().result()
    prompt_logprobs = fresh.compute_logprobs(types.ModelInput.from_ints(TOKENS)).result()
    assert prompt_logprobs[0] is None and len(prompt_logprobs) == len(TOKENS)
    trained = training.forward([datum(TOKENS)], "cross_entropy").result().loss_fn_outputs[0]["logprobs"]
    assert prompt_logprobs[1:] == pytest.approx(trained.tolist(), abs=0.05)  # engine vs trainer

    # the record: every optim_step is a checkpoint; the names point at step 3
    record = record_of(tinker_served, training.model_id)
    assert max(int(p.name) for p in (record / "checkpoints").iterdir() if p.name.isdigit()) == 3
    names = json.loads((record / "tinker.json").read_text())["checkpoints"]
    assert names["weights/s1"]["step"] == 3 and names["sampler_weights/w1"]["step"] == 3
    # ... and the OpenAI routes serve it, by the record's name
    name = record.name
    chat = httpx.post(
        f"{tinker_served.url}/v1/chat/completions",
        headers={"Authorization": f"Bearer {tinker_served.key}"},
        json={"model": f"{name}@3", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2},
        timeout=60,
    )
    assert chat.status_code == 200, chat.text
    # ... and `art ui` (mounted by art serve) shows the model's page, its checkpoints among them
    page = httpx.get(
        f"{tinker_served.url}/ui/m/tinker/{name}",
        headers={"Authorization": f"Bearer {tinker_served.key}"},
        timeout=60,
    )
    assert page.status_code == 200 and name in page.text, page.text[:500]

    # a client made from the state starts where it was saved (step 1 of its own record)
    again = tinker_service.create_training_client_from_state(state.path).result()
    copy = again.forward([datum(TOKENS)], "cross_entropy").result().loss_fn_outputs[0]["logprobs"]
    assert copy.tolist() == pytest.approx(trained.tolist(), abs=1e-5)
    # load_state (deprecated in the SDK) takes a model back to a saved state: the next step
    training.forward_backward([datum(TOKENS)], "cross_entropy").result()
    training.optim_step(types.AdamParams(learning_rate=1e-2)).result()
    with pytest.warns(FutureWarning):
        training.load_state(state.path).result()
    back = training.forward([datum(TOKENS)], "cross_entropy").result().loss_fn_outputs[0]["logprobs"]
    assert back.tolist() == pytest.approx(trained.tolist(), abs=1e-5)


def test_the_rest_client_lists_and_deletes(
    tinker_service: Any, tinker_served: ServeProcess, tiny_model_path: Path
) -> None:
    base = str(tiny_model_path)
    training = tinker_service.create_lora_training_client(base_model=base, rank=4).result()
    path = training.save_state("kept").result().path
    training.save_weights_for_sampler("gone").result()
    rest = tinker.RestClient(base_url=tinker_served.url, api_key=tinker_served.key)
    listed = rest.list_checkpoints(training.model_id).result().checkpoints
    assert {c.checkpoint_id for c in listed} == {"weights/kept", "sampler_weights/gone"}
    assert path in {c.tinker_path for c in rest.list_user_checkpoints().result().checkpoints}
    run = rest.get_training_run(training.model_id).result()
    assert (run.base_model, run.lora_rank) == (base, 4)
    assert training.model_id in {r.training_run_id for r in rest.list_training_runs().result().training_runs}
    rest.delete_checkpoint(training.model_id, "sampler_weights/gone").result()
    assert {c.checkpoint_id for c in rest.list_checkpoints(training.model_id).result().checkpoints} == {
        "weights/kept"
    }
    capabilities = rest.get_server_capabilities().result()
    assert base in [m.model_name for m in capabilities.supported_models]
    with pytest.warns(FutureWarning):  # the deprecated way still answers the same
        assert tinker_service.get_server_capabilities() == capabilities


def test_every_loss_the_sdk_names_is_computed_or_refused(tinker_service: Any, tiny_model_path: Path) -> None:
    training = tinker_service.create_lora_training_client(base_model=str(tiny_model_path), rank=4).result()
    lp = torch.tensor(
        training.forward([datum(TOKENS)], "cross_entropy").result().loss_fn_outputs[0]["logprobs"].tolist()
    )
    advantages = torch.linspace(-1, 1, len(lp))
    rl = {"logprobs": lp.tolist(), "advantages": advantages.tolist()}
    expected = {  # with the sampler's logprobs equal to the learner's, every ratio is 1
        "importance_sampling": -advantages.sum(),
        "ppo": -advantages.sum(),
        "cispo": -(lp * advantages).sum(),
        "dro": -(lp * advantages).sum(),
    }
    for loss_fn, loss in expected.items():
        result = training.forward([datum(TOKENS, **rl)], loss_fn).result()
        assert result.metrics["loss:sum"] == pytest.approx(float(loss), abs=1e-4), loss_fn
    for refused in ("gspo", "stable_reinforce"):
        with pytest.raises(
            tinker.BadRequestError, match="cross_entropy, importance_sampling, ppo, cispo, dro"
        ):
            training.forward_backward([datum(TOKENS, **rl)], refused).result()

    def mean_nll(
        data: list[types.Datum], logprobs: list[torch.Tensor]
    ) -> tuple[torch.Tensor, dict[str, float]]:
        loss = -torch.cat(logprobs).mean()
        return loss, {"nll:mean": float(loss.detach())}

    custom = training.forward_backward_custom([datum(TOKENS)], mean_nll).result()
    assert custom.metrics["loss:sum"] == pytest.approx(float(-lp.mean()), abs=1e-4)


def test_bad_input_is_refused_and_writes_nothing(
    tinker_service: Any, tinker_served: ServeProcess, tiny_model_path: Path
) -> None:
    base = str(tiny_model_path)
    records = tinker_served.path / "tinker" / "models"
    before = files_of(records)
    with pytest.raises(tinker.BadRequestError, match="LoRA rank 100000"):
        tinker_service.create_lora_training_client(base_model=base, rank=100000).result()
    with pytest.raises(tinker.NotFoundError, match="no-such-model"):
        tinker_service.create_lora_training_client(base_model="no-such-org/no-such-model", rank=4).result()
    assert files_of(records) == before  # nothing was made

    training = tinker_service.create_lora_training_client(base_model=base, rank=4).result()
    record = record_of(tinker_served, training.model_id)
    written = files_of(record)
    crooked = types.Datum(
        model_input=types.ModelInput.from_ints(TOKENS[:-1]),
        loss_fn_inputs={"target_tokens": TOKENS[1:], "weights": [1.0, 1.0]},
    )
    with pytest.raises(tinker.BadRequestError, match="datum 1: its token lists disagree"):
        training.forward_backward([datum(TOKENS), crooked], "cross_entropy").result()
    with pytest.raises(tinker.BadRequestError, match="outside the model's vocabulary"):
        training.forward_backward([datum([1, 2, 10**6])], "cross_entropy").result()
    with pytest.raises(tinker.BadRequestError, match="gspo"):
        training.forward_backward([datum(TOKENS)], "gspo").result()
    missing = f"tinker://{training.model_id}/weights/never-saved"
    with pytest.raises(tinker.NotFoundError, match="never-saved"):
        tinker_service.create_training_client_from_state(missing).result()
    with pytest.raises(tinker.NotFoundError, match="never-saved"):
        tinker_service.create_sampling_client(
            model_path=missing.replace("weights", "sampler_weights")
        ).result()
    rest = tinker.RestClient(base_url=tinker_served.url, api_key=tinker_served.key)
    with pytest.raises(tinker.NotFoundError, match="tk000000000000:train:7"):
        rest.list_checkpoints("tk000000000000:train:7").result()
    assert files_of(record) == written  # the refused calls wrote nothing
    # and the client still works after them
    assert training.forward([datum(TOKENS)], "cross_entropy").result().metrics["loss:sum"] > 0


def test_a_resent_work_request_is_answered_once(
    tinker_service: Any, tinker_served: ServeProcess, tiny_model_path: Path
) -> None:
    """The SDK resends a work POST with the same X-Idempotency-Key when a connection drops: the server
    answers the first future again, and the step is taken once."""
    training = tinker_service.create_lora_training_client(base_model=str(tiny_model_path), rank=4).result()
    headers = {"X-API-Key": tinker_served.key}
    body = {
        "model_id": training.model_id,
        "seq_id": 1,
        "type": "optim_step",
        "adam_params": {"learning_rate": 1e-3},
    }
    post = lambda key: httpx.post(  # noqa: E731
        f"{tinker_served.url}/api/v1/optim_step",
        json=body,
        headers={**headers, "X-Idempotency-Key": key},
        timeout=30,
    ).json()
    first, again = post("retry-1"), post("retry-1")
    assert first["request_id"] == again["request_id"]
    result = httpx.post(
        f"{tinker_served.url}/api/v1/retrieve_future",
        json={"request_id": first["request_id"]},
        headers=headers,
        timeout=60,
    ).json()
    assert result["metrics"]["step:max"] == 1.0
    checkpoints = record_of(tinker_served, training.model_id) / "checkpoints"
    assert sorted(p.name for p in checkpoints.iterdir() if p.name.isdigit()) == ["0000", "0001"]  # one step
