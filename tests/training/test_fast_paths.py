"""The trainer's speed paths compute what the plain Hugging Face + PEFT path computes.

Each optimisation of the training step (benchmarks/README.md, "Training profiling") is checked here against
the path it replaced: our decoder forward (fused LoRA, compiled element-wise kernels), the LM head that keeps
its softmax for backward, and the fused AdamW.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from test_trainer import load_model, perturb_lora_b, random_groups

from art.chat.chat_template import ChatTemplate
from art.testing.tiny_model import make_tiny_model
from art.training import fast_decoder as fd
from art.training.batching import collate
from art.training.logprobs import token_logprobs
from art.training.prepare import prepare_step
from art.training.trainer import Trainer
from art.types import RuntimeOptions, TrainSpec

SHAPES = fd.KernelShapes(hidden=64, heads_q=4, heads_kv=2, head_dim=16, intermediate=128, eps=1e-6)
"""The default tiny model's (`make_tiny_model`)."""


@pytest.fixture(scope="module")
def qwen2_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("tiny-qwen2"), arch="qwen2")


def step_grads(trainer: Trainer, sequences: Any, spec: TrainSpec) -> tuple[float, torch.Tensor]:
    metrics = trainer.accumulate_gradients(sequences, spec)
    return metrics["loss"], torch.cat([p.grad.flatten().float() for _, p in trainer.named_params])


def make_trainer(path: Path, dtype: torch.dtype, *, cpp_attention: bool = True) -> tuple[Trainer, Any]:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    options = RuntimeOptions(train_cpp_attention=cpp_attention)
    trainer = Trainer(load_model(path, dtype), ChatTemplate(tokenizer), options=options)
    perturb_lora_b(trainer)
    return trainer, tokenizer


def sequences_for(trainer: Trainer, tokenizer: Any, make_choice: Any, seed: int = 3) -> Any:
    groups = random_groups(tokenizer, make_choice, groups=2, size=4, seed=seed)
    return prepare_step(groups, trainer.tokenizer, TrainSpec(), current_step=0).sequences


@pytest.mark.parametrize("attention", ["sdpa", "cpp"])
@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_fast_decoder_equals_peft_forward_float32(
    arch, attention, tiny_model_path, qwen2_path, make_choice, monkeypatch
):
    """Float32: same loss and gradients as the model's own forward with PEFT's LoRA layers (tight tolerance),
    with SDPA (the default) and with the opt-in C++ causal attention."""
    path = tiny_model_path if arch == "llama" else qwen2_path
    trainer, tokenizer = make_trainer(path, torch.float32, cpp_attention=attention == "cpp")
    assert trainer.fast_decoder is not None
    sequences = sequences_for(trainer, tokenizer, make_choice)
    spec = TrainSpec(micro_batch_tokens=64)  # several micro-batches with right padding
    fast_loss, fast_grad = step_grads(trainer, sequences, spec)
    fast_decoder, trainer.fast_decoder = trainer.fast_decoder, None
    loss, grad = step_grads(trainer, sequences, spec)
    assert fast_loss == pytest.approx(loss, rel=1e-4, abs=1e-7)
    torch.testing.assert_close(fast_grad, grad, rtol=1e-4, atol=1e-7)

    probe = trainer.chat_template.render_ids([{"role": "user", "content": "Say hi."}])
    slow = trainer.logprobs(probe)
    trainer.fast_decoder = fast_decoder
    torch.testing.assert_close(
        torch.tensor(trainer.logprobs(probe)), torch.tensor(slow), rtol=1e-5, atol=1e-5
    )


def test_fast_decoder_bf16_is_as_close_to_float32_as_peft(tiny_model_path, make_choice):
    """bf16: the fast path's gradient is no further from the float32 reference than the PEFT bf16 path's."""
    reference, tokenizer = make_trainer(tiny_model_path, torch.float32)
    reference.fast_decoder = None
    sequences = sequences_for(reference, tokenizer, make_choice, seed=5)
    spec = TrainSpec()
    _, ref_grad = step_grads(reference, sequences, spec)
    trainer, _ = make_trainer(tiny_model_path, torch.bfloat16)
    assert trainer.fast_decoder is not None
    _, fast_grad = step_grads(trainer, sequences, spec)
    trainer.fast_decoder = None
    _, peft_grad = step_grads(trainer, sequences, spec)
    fast_err = float((fast_grad - ref_grad).norm() / ref_grad.norm())
    peft_err = float((peft_grad - ref_grad).norm() / ref_grad.norm())
    assert fast_err < max(1.5 * peft_err, 0.02), (fast_err, peft_err)


def test_fast_decoder_follows_disabled_adapter_and_padding(tiny_model_path):
    """KL's reference forward (adapter disabled) and left padding give what the model's own forward gives."""
    from transformers import AutoTokenizer

    trainer = Trainer(
        load_model(tiny_model_path), ChatTemplate(AutoTokenizer.from_pretrained(tiny_model_path))
    )
    perturb_lora_b(trainer)
    model, fast = trainer.model, trainer.fast_decoder
    assert fast is not None
    ids = torch.randint(5, 200, (2, 9))
    mask = torch.ones_like(ids)
    score = torch.ones_like(ids, dtype=torch.bool)
    with torch.no_grad(), model.disable_adapter():
        base, _ = token_logprobs(model, ids[:, :-1], mask[:, :-1], ids[:, 1:], score[:, :-1])
        base_fast, _ = token_logprobs(
            model, ids[:, :-1], mask[:, :-1], ids[:, 1:], score[:, :-1], fast_decoder=fast
        )
    torch.testing.assert_close(base_fast, base, rtol=1e-5, atol=1e-5)
    with torch.no_grad():
        adapted, _ = token_logprobs(
            model, ids[:, :-1], mask[:, :-1], ids[:, 1:], score[:, :-1], fast_decoder=fast
        )
    assert (adapted - base).abs().max() > 1e-4  # the adapter is on again

    left = mask.clone()
    left[1, :3] = 0  # left padding: not right-padded, so the model's own forward is used
    assert not fast.usable(left[:, :-1])
    assert fast.usable(mask[:, :-1])


@pytest.mark.parametrize("store", [True, False])
def test_head_softmax_kept_or_recomputed_gives_the_same_gradients(tiny_model_path, make_choice, store):
    """Keeping the LM head's softmax for backward equals recomputing each chunk (the memory-bounded path)."""
    import art.training.logprobs as lp

    trainer, tokenizer = make_trainer(tiny_model_path, torch.float32)
    sequences = sequences_for(trainer, tokenizer, make_choice, seed=7)
    defaults = lp.head_logprobs.__kwdefaults__
    saved = dict(defaults)
    try:
        defaults["store_elements"] = lp.STORE_ELEMENTS if store else 0
        loss, grad = step_grads(trainer, sequences, TrainSpec())
        defaults["store_elements"] = 0 if store else lp.STORE_ELEMENTS
        other_loss, other_grad = step_grads(trainer, sequences, TrainSpec())
    finally:
        defaults.update(saved)
    assert loss == pytest.approx(other_loss, rel=1e-5, abs=1e-8)
    torch.testing.assert_close(grad, other_grad, rtol=1e-4, atol=1e-8)


def test_compiled_kernels_equal_eager():
    """The torch.compile'd element-wise kernels compute the eager functions (values and gradients).

    If compiling failed, the kernels are the eager functions and comparing them proves nothing: the test
    skips where the premise (a C++ compiler for inductor's CPU kernels) does not hold, and fails otherwise.
    """
    kernels = fd._Kernels(
        fd.KernelShapes(hidden=8, heads_q=3, heads_kv=1, head_dim=8, intermediate=4, eps=1e-5)
    )
    kernels.prepare(torch.float32)
    if not kernels.compiled:
        if not any(shutil.which(c) for c in (os.environ.get("CXX", "g++"), "g++", "c++", "clang++")):
            pytest.skip("no C++ compiler on PATH: torch.compile cannot build CPU kernels here")
        pytest.fail("torch.compile failed although a C++ compiler is present (see the logged warning)")
    assert kernels.swiglu is not fd._swiglu and kernels.rms_norm is not fd._rms_norm
    torch.manual_seed(0)
    qkv = torch.randn(2 * 7, (3 + 2 * 1) * 8, requires_grad=True)
    cos, sin = torch.randn(1, 7, 1, 8), torch.randn(1, 7, 1, 8)
    h = torch.randn(14, 8, requires_grad=True)
    w = torch.randn(8)
    for fast, eager, args in (
        (kernels.qkv_rope, fd._qkv_rope, (qkv, cos, sin, 3, 1)),
        (kernels.rms_norm, fd._rms_norm, (h, w, 1e-5)),
        (kernels.swiglu, fd._swiglu, (h,)),
    ):
        out, ref = fast(*args), eager(*args)
        outs, refs = (out, ref) if isinstance(out, tuple) else ((out,), (ref,))
        for a, b in zip(outs, refs, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
        g_fast = torch.autograd.grad(sum(o.square().sum() for o in outs), args[0])[0]
        g_ref = torch.autograd.grad(sum(r.square().sum() for r in refs), args[0])[0]
        torch.testing.assert_close(g_fast, g_ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_compiled_kernels_that_compute_something_else_are_not_used(dtype, monkeypatch, caplog):
    """Compiled code can be wrong without failing to build: torch 2.13's on-disk cache served CPU code built
    for another vector ISA (found by forcing ATEN_CPU_CAPABILITY=avx2 on an AVX-512 host: the loss became
    NaN). The kernels are checked against eager when prepared and fall back to eager, saying why."""
    real_compile = torch.compile

    def compile_wrong_swiglu(fn, **kwargs):  # type: ignore[no-untyped-def]
        compiled = real_compile(fn, **kwargs)
        return (lambda x: compiled(x) * 1.5) if fn.__name__.startswith("_swiglu") else compiled

    kernels = fd._Kernels(SHAPES)
    kernels.prepare(dtype)
    assert kernels.compiled  # the right code passes its check in both dtypes
    monkeypatch.setattr(torch, "compile", compile_wrong_swiglu)
    wrong = fd._Kernels(SHAPES)
    with caplog.at_level(logging.WARNING, logger=fd.logger.name):
        wrong.prepare(dtype)
    assert not wrong.compiled and wrong.swiglu is fd._swiglu and wrong.rms_norm is fd._rms_norm
    assert "compiled kernels differ from eager" in caplog.text and "using eager kernels" in caplog.text


def test_kernels_first_wanted_by_a_scoring_forward_still_compile():
    """A forward under no_grad (the trust region's score before the first update) may be the first to want the
    kernels: their check runs backward, so it turns grad mode on for itself. Before, the check "failed" and
    every step of the process trained on eager kernels."""
    kernels = fd._Kernels(SHAPES)
    with torch.no_grad():
        kernels.prepare(torch.float32)
    assert kernels.compiled


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
def test_the_kernels_that_train_do_not_depend_on_what_ran_before(dtype, tiny_model_path, make_choice):
    """One seed, one result, whatever ran earlier in the process. Preparing the kernels draws nothing from the
    global random stream, and their check passes whatever that stream holds: it used to draw its inputs from
    it, and in bf16 an element-wise bound failed for some draws, so one process trained with eager kernels and
    another with compiled ones (seed 3 of benchmarks/rl_seeds.py ended at 0.02 or 0.67 by whether seed 0 ran
    first). And once prepared, a training step and a scoring call compile nothing more: a recompile takes its
    size hints, and so its rounding, from the call that triggers it."""
    for seed in range(8):
        torch.manual_seed(seed)
        state = torch.get_rng_state()
        kernels = fd._Kernels(SHAPES)
        kernels.prepare(dtype)
        assert kernels.compiled, f"the check refused the right kernels after torch.manual_seed({seed})"
        assert torch.equal(torch.get_rng_state(), state), "preparing drew from the global random stream"
    trainer, tokenizer = make_trainer(tiny_model_path, dtype)
    assert trainer.fast_decoder is not None and trainer.fast_decoder.compile
    sequences = sequences_for(trainer, tokenizer, make_choice)
    with trainer._compute():  # what the first step does first (under autocast in bf16)
        trainer.fast_decoder.prepare_kernels(dtype, torch.device("cpu"))
    with torch._dynamo.config.patch(error_on_recompile=True):
        trainer.accumulate_gradients(sequences, TrainSpec())
        trainer.logprobs(sequences[0].token_ids)
        # the trust region's scoring pass: the fast decoder under no_grad, in eval mode
        trainer._score([trainer._inputs(collate(sequences, trainer.pad_id))])


def test_kernels_are_prepared_per_device(tiny_model_path, monkeypatch):
    """The compiled kernels are built on the device they run on: kernels prepared for the CPU do not count as
    ready for a GPU (whose first step would otherwise compile CUDA kernels inside its first forward, after
    compiling CPU ones it never uses: 100 s of step 1 on an H200, benchmarks/results/gpu_check-h200-*.txt)."""
    trainer, _ = make_trainer(tiny_model_path, torch.float32)
    decoder = trainer.fast_decoder
    assert decoder is not None
    seen: list[tuple[torch.dtype, bool, str]] = []
    monkeypatch.setattr(fd, "_KERNELS", {})
    monkeypatch.setattr(
        fd._Kernels,
        "prepare",
        lambda self, dtype, compile=True, device="cpu": (seen.append((dtype, compile, str(device))), None)[1],
    )
    cpu, gpu = torch.device("cpu"), torch.device("cuda")
    assert not decoder.kernels_ready(torch.float32, cpu)
    decoder.prepare_kernels(torch.float32, cpu)
    fd._KERNELS[("cpu", torch.float32, decoder.compile, decoder.shapes)].ready = True
    assert decoder.kernels_ready(torch.float32, cpu)
    assert not decoder.kernels_ready(torch.float32, gpu)
    assert not decoder.kernels_ready(torch.bfloat16, cpu)
    decoder.prepare_kernels(torch.float32, gpu)
    assert seen == [(torch.float32, decoder.compile, "cpu"), (torch.float32, decoder.compile, "cuda")]


def test_fused_adamw_equals_foreach_and_loads_old_checkpoints(tiny_model_path, make_choice, tmp_path):
    """The fused AdamW takes the same step as the default (foreach) one; older checkpoints load into it."""
    trainer, tokenizer = make_trainer(tiny_model_path, torch.float32)
    assert trainer.optimizer.param_groups[0]["fused"]
    params = [p for _, p in trainer.named_params]
    start = [p.detach().clone() for p in params]
    sequences = sequences_for(trainer, tokenizer, make_choice)
    trainer.accumulate_gradients(sequences, TrainSpec())
    grads = [p.grad.clone() for p in params]
    trainer.optimizer.step()
    fused_after = [p.detach().clone() for p in params]
    with torch.no_grad():
        for p, s, g in zip(params, start, grads, strict=True):
            p.copy_(s)
            p.grad = g.clone()
    foreach = torch.optim.AdamW(params, lr=1e-5, betas=(0.9, 0.99), weight_decay=0.1, foreach=True)
    foreach.step()
    for a, b in zip(fused_after, params, strict=True):
        torch.testing.assert_close(a, b.detach(), rtol=1e-6, atol=1e-9)

    trainer.optimizer = foreach  # a checkpoint written by the previous (foreach) trainer ...
    trainer.save(tmp_path / "old")
    trainer.optimizer = trainer._new_optimizer()
    trainer.load(tmp_path / "old")  # ... loads its moments into the fused optimizer
    assert trainer.optimizer.param_groups[0]["fused"]
    state = trainer.optimizer.state[params[0]]
    torch.testing.assert_close(state["exp_avg"], foreach.state[params[0]]["exp_avg"])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_head_softmax_kernel_equals_the_torch_ops(monkeypatch, dtype):
    """The LM head's C++ softmax gives the logprobs, entropies and hidden-state gradients of the torch ops."""
    import art.training.logprobs as lp
    from art.kernels import cpp_kernels

    gen = torch.Generator().manual_seed(0)
    weight = (torch.randn(1000, 64, generator=gen) * 0.3).to(dtype)
    hidden = torch.randn(37, 64, generator=gen).to(dtype)
    targets = torch.randint(0, 1000, (37,), generator=gen)
    grad_out = torch.randn(37, generator=gen)
    results = []
    for fused in (True, False):
        monkeypatch.setattr(cpp_kernels, "usable", lambda *_args, fused=fused, **_kwargs: fused)
        h = hidden.clone().requires_grad_(True)
        logprobs, entropy = lp._HeadLogprobs.apply(h, weight, targets, 10)  # chunks of 10 rows: 4 chunks
        (logprobs * grad_out).sum().backward()
        results.append((logprobs.detach(), entropy, h.grad))
    (lp_fused, ent_fused, g_fused), (lp_torch, ent_torch, g_torch) = results
    torch.testing.assert_close(lp_fused, lp_torch, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ent_fused, ent_torch, rtol=1e-4, atol=1e-4)
    if dtype == torch.float32:
        torch.testing.assert_close(g_fused, g_torch, rtol=1e-5, atol=1e-6)
    else:  # the saved bf16 softmax may differ in its last bit where exp differs in its last float32 bits
        assert (g_fused.float() - g_torch.float()).abs().max() <= 1e-2 * g_torch.float().abs().max()


@pytest.mark.parametrize("attention", ["sdpa", "cpp"])
@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_a_shared_prompt_start_computed_once_gives_the_same_loss_and_gradients(
    arch, attention, tiny_model_path, qwen2_path, make_choice, monkeypatch
):
    """Float32: a micro-batch whose rows share their prompt computes it once (fewer tokens through the
    decoder) and gets the loss and gradients of computing it in every row."""
    path = tiny_model_path if arch == "llama" else qwen2_path
    trainer, tokenizer = make_trainer(path, torch.float32, cpp_attention=attention == "cpp")
    fast = trainer.fast_decoder
    assert fast is not None
    sequences = sequences_for(trainer, tokenizer, make_choice, seed=7)
    spec = TrainSpec(micro_batch_tokens=4096)  # one micro-batch: every row shares the prompt
    calls: list[int] = []
    plain_call = fd.FastDecoder.__call__

    def spy(self: fd.FastDecoder, input_ids_BT: torch.Tensor, shared_prefix: int = 0) -> torch.Tensor:
        calls.append(shared_prefix)
        return plain_call(self, input_ids_BT, shared_prefix)

    monkeypatch.setattr(fd.FastDecoder, "__call__", spy)
    shared_loss, shared_grad = step_grads(trainer, sequences, spec)
    assert calls and min(calls) >= 8, calls  # the chat prompt's tokens were shared
    fast.shared_prefix = False
    calls.clear()
    loss, grad = step_grads(trainer, sequences, spec)
    assert calls == [0]
    assert shared_loss == pytest.approx(loss, rel=1e-5, abs=1e-7)
    torch.testing.assert_close(shared_grad, grad, rtol=1e-4, atol=1e-7)


def test_the_shared_start_stops_at_the_first_difference_the_shortest_row_and_the_last_position(
    tiny_model_path,
):
    """`shared_prefix_length`: the rows' common start, never past a row's real tokens nor the last position,
    and 0 where it would save too little, for one row, or when switched off."""
    from transformers import AutoTokenizer

    trainer = Trainer(
        load_model(tiny_model_path), ChatTemplate(AutoTokenizer.from_pretrained(tiny_model_path))
    )
    fast = trainer.fast_decoder
    assert fast is not None
    start = torch.arange(10, 50)
    ids = torch.stack(
        [torch.cat([start, torch.tensor([7, 8, 9])]), torch.cat([start, torch.tensor([7, 5, 0])])]
    )
    mask = torch.ones_like(ids)
    assert fast.shared_prefix_length(ids, mask) == 41  # 40 + the common 7
    mask[1, 35:] = 0  # the second row has 35 real tokens, then padding
    assert fast.shared_prefix_length(ids, mask) == 35
    same = torch.stack([start, start])
    assert fast.shared_prefix_length(same, torch.ones_like(same)) == 39  # short of the last position
    assert fast.shared_prefix_length(ids[:1], mask[:1]) == 0  # one row: nothing to share
    short = ids[:, :20]
    assert fast.shared_prefix_length(short, torch.ones_like(short)) == 0  # saves 19 < MIN_SHARED_TOKENS
    fast.shared_prefix = False
    assert fast.shared_prefix_length(ids, torch.ones_like(ids)) == 0
