"""The LoRA trainer on the tiny model: in-place wrapping, micro-batching, checkpoints, bf16, KL, learning."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest
import torch

from art.chat.chat_template import ChatTemplate
from art.training.prepare import prepare_step
from art.training.trainer import Trainer
from art.trajectories import Trajectory, TrajectoryGroup
from art.types import TrainSpec

PROMPT = [{"role": "system", "content": "You answer."}, {"role": "user", "content": "Reply with one digit."}]


def load_model(path: Path, dtype: torch.dtype = torch.float32) -> Any:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path, dtype=dtype)


def lora_params(trainer: Trainer) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in trainer.named_params}


def random_groups(
    tokenizer: Any, make_choice: Any, *, groups: int, size: int, seed: int
) -> list[TrajectoryGroup]:
    """Groups of trajectories whose completions are random token ids of varied lengths, random rewards."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(groups):
        trajs = []
        for _ in range(size):
            n = int(torch.randint(2, 12, (1,), generator=g))
            ids = [
                *torch.randint(30, tokenizer.vocab_size, (n,), generator=g).tolist(),
                tokenizer.eos_token_id,
            ]
            lps = (-torch.rand(len(ids), generator=g) * 5).tolist()
            choice = make_choice(tokenizer.decode(ids[:-1]), ids=ids, logprobs=lps)
            trajs.append(
                Trajectory(messages_and_choices=[*PROMPT, choice], reward=float(torch.rand(1, generator=g)))
            )
        out.append(TrajectoryGroup(trajs))
    return out


@pytest.fixture()
def trainer(tiny_model_path: Path, chat_template: ChatTemplate) -> Trainer:
    return Trainer(load_model(tiny_model_path), chat_template)


def perturb_lora_b(trainer: Trainer, seed: int = 0) -> None:
    """Give B non-zero values so that every LoRA parameter has a gradient and the adapter changes outputs."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in trainer.named_params:
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.05)


def test_wraps_in_place_with_frozen_shared_base(tiny_model_path, chat_template, tokenizer, make_choice):
    model = load_model(tiny_model_path)
    q_weight = model.model.layers[0].self_attn.q_proj.weight
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    trainer = Trainer(model, chat_template)
    q_proj = model.model.layers[0].self_attn.q_proj  # the same model object, now with LoRA layers inside
    assert q_proj.base_layer.weight is q_weight and not q_weight.requires_grad
    targets = {n.split(".")[-4] for n, _ in trainer.named_params}
    assert targets == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
    assert q_proj.r["default"] == 8 and q_proj.scaling["default"] == 2.0  # alpha 16 / r 8
    assert all(p.dtype == torch.float32 for _, p in trainer.named_params)
    # Checkpoint 0 is deterministic: the same seed gives the same A, and B = 0.
    again = Trainer(load_model(tiny_model_path), chat_template)
    for (n, p), (_, q) in zip(trainer.named_params, again.named_params, strict=True):
        assert torch.equal(p, q), n
        if "lora_B" in n:
            assert not p.any()
    trainer.train_step(
        random_groups(tokenizer, make_choice, groups=2, size=4, seed=0),
        TrainSpec(learning_rate=1e-3),
        current_step=0,
        progress=False,
    )
    for name, p in trainer.model.get_base_model().named_parameters():
        if "lora_" not in name:
            assert torch.equal(p, before[name.replace(".base_layer", "")]), name


def test_micro_batches_give_the_same_gradient(trainer, tokenizer, make_choice):
    perturb_lora_b(trainer)
    groups = random_groups(tokenizer, make_choice, groups=3, size=4, seed=1)
    sequences = prepare_step(groups, trainer.tokenizer, TrainSpec(), current_step=0).sequences
    assert len({len(s) for s in sequences}) > 1  # varied lengths: padding is exercised

    def grads(budget: int, **kw: Any) -> tuple[dict[str, torch.Tensor], dict[str, float]]:
        metrics = trainer.accumulate_gradients(sequences, TrainSpec(micro_batch_tokens=budget, **kw))
        return {n: p.grad.clone() for n, p in trainer.named_params}, metrics

    one, m_one = grads(10**6)
    assert m_one["num_micro_batches"] == 1
    for budget in (64, 8):
        split, m_split = grads(budget)
        assert m_split["num_micro_batches"] > 1
        assert m_split["loss"] == pytest.approx(m_one["loss"], rel=1e-4, abs=1e-6)
        for n in one:
            torch.testing.assert_close(split[n], one[n], atol=1e-6, rtol=1e-4, msg=n)
    assert max(g.abs().max() for g in one.values()) > 0
    # Sequence-level ratios and PPO go through the same accumulation.
    one, _ = grads(10**6, loss_fn="ppo", importance_sampling_level="sequence")
    split, _ = grads(8, loss_fn="ppo", importance_sampling_level="sequence")
    for n in one:
        torch.testing.assert_close(split[n], one[n], atol=1e-6, rtol=1e-4, msg=n)


def test_save_load_round_trip(tiny_model_path, chat_template, tokenizer, make_choice, tmp_path):
    import peft

    spec = TrainSpec(learning_rate=1e-3)
    first = random_groups(tokenizer, make_choice, groups=2, size=4, seed=2)
    second = random_groups(tokenizer, make_choice, groups=2, size=4, seed=3)
    a = Trainer(load_model(tiny_model_path), chat_template)
    a.train_step(first, spec, current_step=0, progress=False)
    a.save(tmp_path / "ckpt")
    files = {p.name for p in (tmp_path / "ckpt").iterdir()}
    assert {
        "adapter_config.json",
        "adapter_model.safetensors",
        "optimizer.safetensors",
        "trainer_state.json",
    } <= files
    assert all(name.endswith((".json", ".safetensors", ".md")) for name in files), files  # nothing pickled
    assert json.loads((tmp_path / "ckpt" / "trainer_state.json").read_text())["optimizer_steps"] == 1

    probe = chat_template.render_ids([*PROMPT, {"role": "assistant", "content": "7"}])
    served = peft.PeftModel.from_pretrained(
        load_model(tiny_model_path), tmp_path / "ckpt"
    )  # plain peft loads it
    with torch.no_grad():
        logits = served(input_ids=torch.tensor([probe])).logits[0, :-1].float()
    expected = torch.log_softmax(logits, -1).gather(-1, torch.tensor(probe[1:])[:, None]).squeeze(-1)
    torch.testing.assert_close(torch.tensor(a.logprobs(probe)), expected, atol=1e-5, rtol=1e-5)

    a.train_step(second, spec, current_step=1, progress=False)
    b = Trainer(load_model(tiny_model_path), chat_template, seed=123)  # different init: load must override it
    b.load(tmp_path / "ckpt")
    assert b.optimizer_steps == 1 and b.last_step == 0
    b.train_step(second, spec, current_step=1, progress=False)
    after_a, after_b = lora_params(a), lora_params(b)
    for n in after_a:
        torch.testing.assert_close(after_b[n], after_a[n], atol=1e-7, rtol=1e-6, msg=n)


def test_nothing_to_train_leaves_the_adapter(trainer, make_choice):
    group = TrajectoryGroup(
        [Trajectory(messages_and_choices=[*PROMPT, make_choice("7")], reward=1.0) for _ in range(4)]
    )
    before = lora_params(trainer)
    report = trainer.train_step([group], TrainSpec(), current_step=0, progress=False)
    assert (report.trainable_groups, report.trainable_trajectories) == (0, 0)
    assert report.message is not None and "all rewards equal" in report.message
    assert trainer.optimizer_steps == 0
    assert all(torch.equal(before[n], p) for n, p in trainer.named_params)


def test_step_metrics_and_kl(trainer, tokenizer, make_choice):
    groups = random_groups(tokenizer, make_choice, groups=2, size=4, seed=4)
    spec = TrainSpec(learning_rate=1e-2, kl_penalty_coef=0.1, micro_batch_tokens=64)
    report = trainer.train_step(groups, spec, current_step=0, progress=False)
    m = report.metrics
    for key in (
        "loss",
        "entropy",
        "grad_norm",
        "ratio_mean",
        "clip_fraction",
        "kl",
        "num_tokens",
        "num_assistant_tokens",
        "trainable_groups",
        "trainable_trajectories",
        "reward_mean",
        "reward_std",
        "tokenize_s",
        "forward_backward_s",
        "optimizer_s",
        "step_s",
        "num_micro_batches",
    ):
        assert key in m, key
    assert m["kl"] == pytest.approx(0.0, abs=1e-9)  # B = 0: the policy is the base model
    assert m["num_micro_batches"] > 1 and report.trainable_trajectories == 8
    m2 = trainer.train_step(groups, spec, current_step=1, progress=False).metrics
    assert m2["kl"] > 0


def test_bf16_model_trains_with_float32_lora(tiny_model_path, chat_template, tokenizer, make_choice):
    trainer = Trainer(load_model(tiny_model_path, torch.bfloat16), chat_template)
    assert all(p.dtype == torch.float32 for _, p in trainer.named_params)
    probe = chat_template.render_ids([*PROMPT, {"role": "assistant", "content": "7"}])
    before = trainer.logprobs(probe)
    groups = random_groups(tokenizer, make_choice, groups=2, size=4, seed=5)
    report = trainer.train_step(groups, TrainSpec(learning_rate=1e-2), current_step=0, progress=False)
    assert torch.isfinite(torch.tensor(report.metrics["loss"])) and report.metrics["grad_norm"] > 0
    assert any(p.abs().sum() > 0 for n, p in trainer.named_params if "lora_B" in n)
    assert trainer.logprobs(probe) != before


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
def test_learning_raises_the_target_token(dtype, tiny_model_path, chat_template, tokenizer, make_choice):
    """GRPO on "reply with one digit", reward 1 for 7: P(7) rises from ~4% to most of the mass (both dtypes)."""
    model = load_model(tiny_model_path, dtype)
    # A random tiny model's tied embeddings (std 0.02, 64 dims) cap any logit near 1, so no adapter could
    # make one token likely; scale them to the size a trained model's have.
    with torch.no_grad():
        model.get_input_embeddings().weight.mul_(5.0)
    trainer = Trainer(model, chat_template)
    prompt = chat_template.render_ids(PROMPT, add_generation_prompt=True)
    digits = [tokenizer.encode(str(d), add_special_tokens=False)[0] for d in range(10)]
    eos = tokenizer.eos_token_id
    g = torch.Generator().manual_seed(0)
    history = []
    for step in range(8):
        # Sample by hand from the policy, constrained to the ten digits; report the policy's own logprobs.
        logprobs = {d: trainer.logprobs([*prompt, d, eos])[-2:] for d in digits}
        p_digits = torch.tensor([logprobs[d][0] for d in digits]).softmax(0)
        history.append(float(p_digits[7]))
        if history[-1] > 0.5:
            break
        groups = []
        for _ in range(4):
            picks = torch.multinomial(p_digits, 8, replacement=True, generator=g).tolist()
            trajs = [
                Trajectory(
                    messages_and_choices=[
                        *PROMPT,
                        make_choice(str(k), ids=[digits[k], eos], logprobs=logprobs[digits[k]]),
                    ],
                    reward=float(k == 7),
                )
                for k in picks
            ]
            groups.append(TrajectoryGroup(trajs))
        trainer.train_step(groups, TrainSpec(learning_rate=1e-2), current_step=step, progress=False)
    assert history[0] < 0.1 and history[-1] > 0.5, history


def test_bf16_compute_path_matches_peft_float32_lora(tiny_model_path, chat_template, tokenizer, make_choice):
    """The bf16 LoRA compute path (autocast, no float32 input copies) gives peft's float32-LoRA results."""
    trainer = Trainer(load_model(tiny_model_path, torch.bfloat16), chat_template)
    perturb_lora_b(trainer)
    probe = chat_template.render_ids([*PROMPT, {"role": "assistant", "content": "The quick brown fox."}])
    fast = torch.tensor(trainer.logprobs(probe))
    with torch.no_grad():
        logits = trainer.model(input_ids=torch.tensor([probe])).logits[0, :-1].float()  # peft's own path
    reference = torch.log_softmax(logits, -1).gather(-1, torch.tensor(probe[1:])[:, None]).squeeze(-1)
    assert (fast - reference).abs().mean() < 0.02

    sequences = prepare_step(
        random_groups(tokenizer, make_choice, groups=2, size=4, seed=6),
        trainer.tokenizer,
        TrainSpec(),
        current_step=0,
    ).sequences
    trainer.accumulate_gradients(sequences, TrainSpec())
    fast_grad = torch.cat([p.grad.flatten() for _, p in trainer.named_params])
    trainer._compute = contextlib.nullcontext  # type: ignore[method-assign]  # peft's float32 LoRA path
    trainer.accumulate_gradients(sequences, TrainSpec())
    slow_grad = torch.cat([p.grad.flatten() for _, p in trainer.named_params])
    assert torch.nn.functional.cosine_similarity(fast_grad, slow_grad, dim=0) > 0.99
    assert (fast_grad.norm() / slow_grad.norm() - 1).abs() < 0.05


def test_checkpoint_zero_and_mismatched_config(tiny_model_path, chat_template, tmp_path):
    from art.types import LoRAConfig

    a = Trainer(load_model(tiny_model_path), chat_template)
    a.save(tmp_path / "0000")  # the untrained adapter, before any step
    b = Trainer(load_model(tiny_model_path), chat_template, seed=7)
    b.load(tmp_path / "0000")
    assert b.optimizer_steps == 0 and b.last_step is None
    for (n, p), (_, q) in zip(a.named_params, b.named_params, strict=True):
        assert torch.equal(p, q), n
    other = Trainer(load_model(tiny_model_path), chat_template, LoRAConfig(r=4, alpha=8))
    with pytest.raises(ValueError, match="r=8"):
        other.load(tmp_path / "0000")
