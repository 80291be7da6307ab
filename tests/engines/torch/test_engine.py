"""The torch engine: continuous batching, seeds, score, adapters, aliases, pause/resume, abort, limits."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest
from helpers_wait import until

torch = pytest.importorskip("torch")

from art.engines.base import (  # noqa: E402
    ContextLengthError,
    Engine,
    GenerateRequest,
    ModelNotFoundError,
    SamplingParams,
)
from art.engines.torch.lora import AdapterError  # noqa: E402


async def run(
    engine: Any, model: str, prompt: list[int], **sampling: Any
) -> tuple[list[int], list[float], str]:
    """(token ids, logprobs, finish reason) of one generation."""
    ids: list[int] = []
    logprobs: list[float] = []
    reason = ""
    request = GenerateRequest(model=model, prompt_token_ids=prompt, sampling=SamplingParams(**sampling))
    async with contextlib.aclosing(engine.generate(request)) as outputs:
        async for out in outputs:
            ids += out.token_ids
            logprobs += out.logprobs
            reason = out.finish_reason or reason
    return ids, logprobs, reason


PROMPT = [1, 40, 41, 42, 43, 2, 1, 50]


def test_engine_satisfies_the_protocol(engine: Any) -> None:
    assert isinstance(engine, Engine)
    assert engine.model_names()[0] == "tiny"


async def test_seeded_generation_is_reproducible_and_seeds_differ(engine: Any) -> None:
    a = await run(engine, "tiny", PROMPT, max_tokens=12, seed=7)
    b = await run(engine, "tiny", PROMPT, max_tokens=12, seed=7)
    c = await run(engine, "tiny", PROMPT, max_tokens=12, seed=8)
    assert a == b
    assert a[0] != c[0]
    assert len(a[0]) == 12 and a[2] == "length"


async def test_concurrent_requests_equal_their_solo_results(engine: Any) -> None:
    prompts = [[*PROMPT[: 3 + i % 5], 60 + i] for i in range(24)]
    kwargs = [
        dict(max_tokens=4 + (i * 7) % 20, seed=i, temperature=[1.0, 0.7, 0.0][i % 3], top_p=[1.0, 0.9][i % 2])
        for i in range(24)
    ]
    solo = [await run(engine, "tiny", p, **k) for p, k in zip(prompts, kwargs, strict=True)]
    together = await asyncio.gather(
        *(run(engine, "tiny", p, **k) for p, k in zip(prompts, kwargs, strict=True))
    )
    for s, t in zip(solo, together, strict=True):
        assert s[0] == t[0]
        assert s[1] == pytest.approx(t[1], abs=1e-4)


async def test_a_burst_reaching_an_idle_engine_is_admitted_by_one_prefill(
    engine: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Requests that arrive a few ms apart at an idle engine (as a server hands over a rollout's requests)
    start together: one prefill admits them all, so 8 requests of 3 tokens take 2 decode steps, not 2 per
    straggler; the tokens are what each request gets alone. The arrival gap the worker waits for is
    widened to 1 s here (15 ms by default, a measured choice): on two loaded cores a request 2 ms behind
    the one before can reach the worker more than 15 ms later, and this tests the mechanism, not that."""
    from art.engines.torch import scheduler

    prompts = [[*PROMPT, 70 + i] for i in range(8)]
    solo = [
        await run(engine, "tiny", p, max_tokens=3, seed=i, ignore_eos=True) for i, p in enumerate(prompts)
    ]

    async def arrive(i: int) -> tuple[list[int], list[float], str]:
        await asyncio.sleep(0.002 * i)
        return await run(engine, "tiny", prompts[i], max_tokens=3, seed=i, ignore_eos=True)

    monkeypatch.setattr(scheduler, "ARRIVAL_GAP", 1.0)
    monkeypatch.setattr(scheduler, "ARRIVAL_WINDOW", 30.0)
    steps = engine._scheduler.steps
    together = await asyncio.gather(*(arrive(i) for i in range(8)))
    assert engine._scheduler.steps - steps == 2
    assert [t[0] for t in together] == [s[0] for s in solo]


async def test_ignore_eos_generates_exactly_max_tokens_past_end_of_turn(engine: Any) -> None:
    stopped = None
    for seed in range(300):  # a seed whose sample ends early with an end-of-turn token
        result = await run(engine, "tiny", PROMPT, max_tokens=40, seed=seed, temperature=1.5)
        if result[2] == "stop":
            stopped = seed, result
            break
    assert stopped is not None, "no seed ended early: the test needs one"
    seed, (ids, _, _) = stopped
    full, _, reason = await run(
        engine, "tiny", PROMPT, max_tokens=40, seed=seed, temperature=1.5, ignore_eos=True
    )
    assert reason == "length" and len(full) == 40
    assert full[: len(ids)] == ids  # the same tokens up to and including the end-of-turn token


async def test_identical_prompts_are_shared_but_sample_independently(engine: Any) -> None:
    results = await asyncio.gather(*(run(engine, "tiny", PROMPT, max_tokens=10, seed=s) for s in range(6)))
    assert len({tuple(r[0]) for r in results}) == 6
    for s, r in enumerate(results):
        alone = await run(engine, "tiny", PROMPT, max_tokens=10, seed=s)
        assert r[0] == alone[0] and r[1] == pytest.approx(alone[1], abs=1e-4)


async def test_a_prefix_shared_by_distinct_prompts_runs_once_with_unchanged_results(
    engine: Any, adapter_paths: list[Path]
) -> None:
    """Distinct prompts with a common start (a system prompt) admitted together compute it once; every
    request still gets exactly its solo tokens and logprobs, also with adapters mixed in the batch."""
    system = [1, *range(100, 124), 2]  # 26 shared tokens
    prompts = [[*system, 60 + i, *range(70, 70 + i % 4)] for i in range(8)]
    engine.load_adapter("tiny@1", adapter_paths[0])
    try:
        for models, share in (
            (["tiny"] * 8, True),
            (["tiny@1"] * 8, True),
            (["tiny", "tiny@1"] * 4, True),
            (["tiny"] * 8, False),
        ):
            engine.share_prefixes = share
            kwargs = [dict(max_tokens=6, seed=i, temperature=[1.0, 0.0][i % 2]) for i in range(8)]
            solo = [await run(engine, m, p, **k) for m, p, k in zip(models, prompts, kwargs, strict=True)]
            await engine.run(engine.release_idle_cache)  # forget the solo runs' kept starts (prefix cache)
            before = engine.prefill_tokens
            await engine.pause()  # all eight wait, then join in one prefill
            tasks = [
                asyncio.create_task(run(engine, m, p, **k))
                for m, p, k in zip(models, prompts, kwargs, strict=True)
            ]
            await until(lambda: held(engine) == 8, "the eight requests to reach the paused engine")
            await engine.resume()
            together = await asyncio.gather(*tasks)
            computed = engine.prefill_tokens - before
            for s, t in zip(solo, together, strict=True):
                assert s[0] == t[0]
                assert s[1] == pytest.approx(t[1], abs=1e-4)
            if share and len(set(models)) == 1:  # one adapter: the 26 shared tokens ran once, not 8 times
                assert computed <= len(system) + 8 * (max(map(len, prompts)) - len(system))
            else:  # turned off, or rows of different adapters (their prefixes differ): all in full
                assert computed >= 8 * len(system)
    finally:
        engine.share_prefixes = True
        engine.unload_adapter("tiny@1")


async def test_a_conversations_next_turn_prefills_only_what_is_new(
    engine: Any, adapter_paths: list[Path]
) -> None:
    """A finished request's keys and values are kept: the next turn of the same conversation (its prompt,
    the reply, a new message) restores them and runs only the new tokens, with unchanged results; they are
    never used for another adapter, nor after the weights change."""
    first = [1, *range(100, 130), 2, 60]
    reply, _, _ = await run(engine, "tiny", first, max_tokens=6, temperature=0.0, ignore_eos=True)
    second = [*first, *reply, 2, 1, 61, 62, 63]  # the reply, then a new user message

    async def computed(model: str, prompt: list[int]) -> tuple[int, tuple[list[int], list[float], str]]:
        before = engine.prefill_tokens
        result = await run(engine, model, prompt, max_tokens=5, seed=3)
        return engine.prefill_tokens - before, result

    used, kept = await computed("tiny", second)
    assert used == len(second) - (
        len(first) + len(reply) - 1
    )  # all but the positions the first request cached
    engine.share_prefixes = False
    try:
        await engine.run(engine.release_idle_cache)
        used_full, full = await computed("tiny", second)
    finally:
        engine.share_prefixes = True
    assert used_full == len(second)
    assert kept[0] == full[0] and kept[1] == pytest.approx(full[1], abs=1e-4)

    await run(engine, "tiny", first, max_tokens=6, temperature=0.0, ignore_eos=True)  # kept again
    engine.load_adapter("tiny@1", adapter_paths[0])
    try:
        used_other, _ = await computed("tiny@1", second)  # another adapter's keys differ: all computed
        assert used_other == len(second)
    finally:
        engine.unload_adapter("tiny@1")
    await run(engine, "tiny", first, max_tokens=6, temperature=0.0, ignore_eos=True)
    engine._forward.weights_version += 1  # as when the base model's parameters are replaced
    used_stale, _ = await computed("tiny", second)
    assert used_stale == len(second)


async def test_a_failure_to_keep_a_prompt_start_never_fails_the_request(
    engine: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from art.engines.torch.prefix_cache import PrefixCache

    def broken(*args: Any, **kwargs: Any) -> None:
        raise MemoryError("no room for the pool")

    monkeypatch.setattr(PrefixCache, "retain", broken)
    prompt = [1, *range(100, 130), 2, 60]
    ids, _, reason = await run(engine, "tiny", prompt, max_tokens=4, seed=1, ignore_eos=True)
    assert len(ids) == 4 and reason == "length"
    assert (await run(engine, "tiny", prompt, max_tokens=4, seed=1, ignore_eos=True))[0] == ids


def test_shared_prefix_length_keeps_a_token_per_prompt_and_only_shares_when_it_pays() -> None:
    from art.engines.torch.scheduler import SHARED_PREFIX_MIN_SAVED, shared_prefix_length

    n = SHARED_PREFIX_MIN_SAVED  # a prefix this long shared by two prompts just pays
    assert shared_prefix_length(2, n, min_prompt=999) == n
    assert shared_prefix_length(2, n - 1, min_prompt=999) == 0  # saves too little
    assert shared_prefix_length(5, n, min_prompt=n) == n - 1  # the shortest prompt keeps its last token
    assert shared_prefix_length(1, n, min_prompt=999) == 0  # one prompt: nothing to share
    assert shared_prefix_length(3, 0, min_prompt=999) == 0


async def test_score_matches_generated_logprobs_and_hf(engine: Any) -> None:
    ids, logprobs, _ = await run(engine, "tiny", PROMPT, max_tokens=10, seed=3)
    scored = await engine.score("tiny", PROMPT + ids)
    assert len(scored) == len(PROMPT) + len(ids) - 1
    assert scored[len(PROMPT) - 1 :] == pytest.approx(logprobs, abs=1e-4)
    with torch.inference_mode():
        hf = torch.log_softmax(engine.hf_model(torch.tensor([PROMPT + ids])).logits[0].float(), -1)
    reference = hf[:-1].gather(-1, torch.tensor(PROMPT + ids)[1:, None]).squeeze(-1)
    assert scored == pytest.approx(reference.tolist(), abs=1e-4)


async def test_generation_stops_at_end_of_turn(engine: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sampled end-of-turn token ends its sequence there, with reason "stop", both on a decode step and
    on the prefill's first token. No seed search (a random tiny model samples one rarely, and which seed
    does depends on the host's kernels): the engine's end-of-turn ids are set to a token this seeded
    sample draws at its 4th step or later, and a logit bias makes the real end-of-turn token the first."""
    scheduler = engine._scheduler
    eot = engine.tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert eot in scheduler._stop_ids.tolist()  # the chat template's end of turn ends a sequence

    ids, _, reason = await run(engine, "tiny", PROMPT, max_tokens=12, seed=5, ignore_eos=True)
    assert reason == "length" and len(ids) == 12
    k = next(i for i in range(3, 12) if ids[i] not in ids[:i])  # its first appearance, on a decode step
    monkeypatch.setattr(scheduler, "_stop_ids", torch.tensor([ids[k]]))
    stopped, _, reason = await run(engine, "tiny", PROMPT, max_tokens=12, seed=5)
    assert (stopped, reason) == (ids[: k + 1], "stop")
    monkeypatch.undo()

    first, _, reason = await run(engine, "tiny", PROMPT, max_tokens=12, seed=5, logit_bias={eot: 100.0})
    assert (first, reason) == ([eot], "stop")


async def test_context_window_limits(engine: Any) -> None:
    with pytest.raises(ContextLengthError, match=str(engine.max_model_len)):
        await run(engine, "tiny", [5] * engine.max_model_len)
    ids, _, reason = await run(engine, "tiny", [5] * (engine.max_model_len - 3), seed=1, temperature=0)
    assert reason in ("length", "stop") and len(ids) <= 3


async def test_out_of_vocabulary_ids_are_refused_before_they_reach_a_batch(engine: Any) -> None:
    with pytest.raises(ValueError, match="token ids"):
        await run(engine, "tiny", [*PROMPT, 10**6])
    with pytest.raises(ValueError, match="token ids"):
        await engine.score("tiny", [-1, 5])


async def test_unknown_model(engine: Any) -> None:
    with pytest.raises(ModelNotFoundError):
        await run(engine, "nope", PROMPT)


async def test_abort_frees_the_slot(engine: Any) -> None:
    request = GenerateRequest(model="tiny", prompt_token_ids=PROMPT, sampling=SamplingParams(seed=1))
    async with contextlib.aclosing(engine.generate(request)) as outputs:
        async for _ in outputs:
            break
    await until(lambda: engine.num_running == 0, "the aborted sequence to leave its slot")


def held(engine: Any) -> int:
    """Sequences submitted to the engine's worker and not admitted yet (held there while it is paused)."""
    scheduler = engine._scheduler
    with scheduler._cond:
        return len(scheduler._inbox) + len(scheduler._waiting)


async def passes_of_the_worker(engine: Any) -> None:
    """Return once the worker has gone through two whole iterations: two jobs, one after the other (a job
    runs between steps, paused or not, and an unpaused worker steps right after a job's iteration)."""
    for _ in range(2):
        await engine.run(lambda: None)


async def test_pause_holds_requests_until_resume(engine: Any) -> None:
    await engine.pause()
    steps, prefilled = engine.decode_steps, engine.prefill_tokens
    task = asyncio.create_task(run(engine, "tiny", PROMPT, max_tokens=5, seed=1))
    await until(lambda: held(engine) == 1, "the request to reach the paused engine")
    await passes_of_the_worker(engine)
    assert not task.done() and (engine.decode_steps, engine.prefill_tokens) == (steps, prefilled)
    assert len(await engine.score("tiny", PROMPT)) == len(PROMPT) - 1  # the canary runs while paused
    await engine.resume()
    assert (await asyncio.wait_for(task, 30))[0] == (await run(engine, "tiny", PROMPT, max_tokens=5, seed=1))[
        0
    ]


async def test_pause_holds_running_sequences_between_steps(engine: Any) -> None:
    task = asyncio.create_task(run(engine, "tiny", PROMPT, max_tokens=200, seed=2))
    await until(lambda: engine.num_running, "the sequence to run")
    await engine.pause()
    steps = engine.decode_steps
    await passes_of_the_worker(engine)
    assert engine.decode_steps == steps and not task.done() and engine.num_running == 1
    await engine.resume()
    ids, _, _ = await asyncio.wait_for(task, 60)
    assert ids == (await run(engine, "tiny", PROMPT, max_tokens=200, seed=2))[0]


async def test_idle_kv_cache_is_released_and_regrown_but_never_under_running_sequences(engine: Any) -> None:
    before = await run(engine, "tiny", PROMPT, max_tokens=12, seed=3)
    cache = engine._scheduler.cache
    assert cache.nbytes() > 0
    with pytest.raises(RuntimeError, match="worker"):
        engine.release_idle_cache()  # only between steps, on the worker
    assert await engine.run(engine.release_idle_cache) > 0
    assert cache.nbytes() == 0
    assert await run(engine, "tiny", PROMPT, max_tokens=12, seed=3) == before  # allocated again, same tokens

    task = asyncio.create_task(run(engine, "tiny", PROMPT, max_tokens=200, seed=2))
    await until(lambda: engine.num_running, "the sequence to run")
    await engine.pause()  # a running sequence is held with its cache
    assert await engine.run(engine.release_idle_cache) == 0 and cache.nbytes() > 0
    await engine.resume()
    ids, _, _ = await asyncio.wait_for(task, 60)
    assert ids == (await run(engine, "tiny", PROMPT, max_tokens=200, seed=2))[0]


async def test_kv_cache_is_freed_after_the_engine_idles_and_allocated_again_on_demand(
    tiny_model_path: Path,
) -> None:
    from art.engines.torch.torch_engine import TorchEngine

    eng = TorchEngine.from_pretrained(
        str(tiny_model_path), served_name="tiny", dtype="float32", num_threads=1, release_cache_after_idle=0.3
    )
    try:
        cache = eng._scheduler.cache
        first = await run(eng, "tiny", PROMPT, max_tokens=12, seed=5)
        assert cache.nbytes() > 0  # kept through short gaps (an agent's turn between two requests)
        await until(lambda: cache.nbytes() == 0, "the idle engine to free its KV cache")
        assert await run(eng, "tiny", PROMPT, max_tokens=12, seed=5) == first
    finally:
        await eng.close()


async def test_adapters_aliases_and_checkpoint_steps(engine: Any, adapter_paths: list[Path]) -> None:
    engine.load_adapter("tiny@1", adapter_paths[0])
    engine.load_adapter("tiny@2", adapter_paths[1], checkpoint_step=22)
    try:
        base = await run(engine, "tiny", PROMPT, max_tokens=8, seed=5)
        one = await run(engine, "tiny@1", PROMPT, max_tokens=8, seed=5)
        two = await run(engine, "tiny@2", PROMPT, max_tokens=8, seed=5)
        assert len({tuple(base[0]), tuple(one[0]), tuple(two[0])}) == 3

        # Mixed in one batch, each request still gets its own adapter's tokens.
        mixed = await asyncio.gather(
            *(run(engine, m, PROMPT, max_tokens=8, seed=5) for m in ["tiny@2", "tiny", "tiny@1"] * 3)
        )
        for i, result in enumerate(mixed):
            assert result[0] == [two, base, one][i % 3][0]

        request = GenerateRequest(
            model="tiny@2", prompt_token_ids=PROMPT, sampling=SamplingParams(max_tokens=1)
        )
        async with contextlib.aclosing(engine.generate(request)) as outputs:
            first = await outputs.__anext__()
        assert first.checkpoint_step == 22 and first.model == "tiny@2"

        engine.set_alias("tiny-latest", "tiny@1")
        assert "tiny-latest" in engine.model_names()
        assert (await run(engine, "tiny-latest", PROMPT, max_tokens=8, seed=5))[0] == one[0]
        engine.load_adapter("tiny@1", adapter_paths[1])  # replaced: the alias follows the name
        assert (await run(engine, "tiny-latest", PROMPT, max_tokens=8, seed=5))[0] == two[0]
        with pytest.raises(ModelNotFoundError):
            engine.set_alias("x", "missing@9")
    finally:
        engine.unload_adapter("tiny@1")
        engine.unload_adapter("tiny@2")
    assert engine.model_names() == ["tiny"]  # aliases of unloaded adapters go too


async def test_adapter_matches_peft_forward(
    engine: Any, adapter_paths: list[Path], tiny_model_path: Path
) -> None:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    engine.load_adapter("peft-check", adapter_paths[1])
    try:
        tokens = [*PROMPT, 70, 71, 72, 73]
        scored = await engine.score("peft-check", tokens)
    finally:
        engine.unload_adapter("peft-check")
    base = AutoModelForCausalLM.from_pretrained(tiny_model_path, dtype=torch.float32)
    peft_model = PeftModel.from_pretrained(base, str(adapter_paths[1])).eval()
    with torch.inference_mode():
        logprobs = torch.log_softmax(peft_model(torch.tensor([tokens])).logits[0].float(), -1)
    reference = logprobs[:-1].gather(-1, torch.tensor(tokens)[1:, None]).squeeze(-1)
    assert scored == pytest.approx(reference.tolist(), abs=1e-4)
    base_scored = await engine.score("tiny", tokens)
    assert max(abs(a - b) for a, b in zip(base_scored, scored, strict=True)) > 1e-2


def test_bad_adapters_are_refused(engine: Any, adapter_paths: list[Path], tmp_path: Path) -> None:
    import json
    import shutil

    with pytest.raises(AdapterError, match=r"adapter_config\.json"):
        engine.load_adapter("bad", tmp_path)
    dora = tmp_path / "dora"
    shutil.copytree(adapter_paths[0], dora)
    config = json.loads((dora / "adapter_config.json").read_text())
    (dora / "adapter_config.json").write_text(json.dumps({**config, "use_dora": True}))
    with pytest.raises(AdapterError, match="use_dora"):
        engine.load_adapter("bad", dora)
    pickled = tmp_path / "pickled"
    pickled.mkdir()
    shutil.copy(adapter_paths[0] / "adapter_config.json", pickled)
    (pickled / "adapter_model.bin").write_bytes(b"not loaded")
    with pytest.raises(AdapterError, match="only safetensors"):
        engine.load_adapter("bad", pickled)
    assert "bad" not in engine.model_names()


async def test_engine_keeps_serving_after_peft_wraps_the_model(tiny_model_path: Path) -> None:
    from peft import LoraConfig, get_peft_model

    from art.engines.torch.torch_engine import TorchEngine

    eng = TorchEngine.from_pretrained(str(tiny_model_path), served_name="t", dtype="float32", num_threads=1)
    try:
        before = await run(eng, "t", PROMPT, max_tokens=8, seed=4)
        get_peft_model(eng.hf_model, LoraConfig(r=4, target_modules=["q_proj", "v_proj", "up_proj"]))
        after = await run(eng, "t", PROMPT, max_tokens=8, seed=4)
        assert before == after
    finally:
        await eng.close()


async def test_run_computes_on_the_worker_thread_with_autograd_even_while_paused(engine: Any) -> None:
    import threading

    def job() -> tuple[str, bool, list[float]]:
        x = torch.ones(3, requires_grad=True)
        (x * 2).sum().backward()  # fails under inference mode, which generation uses
        assert x.grad is not None
        return threading.current_thread().name, torch.is_inference_mode_enabled(), x.grad.tolist()

    await engine.pause()
    try:
        name, inference_mode, grad = await asyncio.wait_for(engine.run(job), 30)
    finally:
        await engine.resume()
    assert (name, inference_mode, grad) == ("art-engine", False, [2.0, 2.0, 2.0])
    with pytest.raises(ZeroDivisionError):
        await engine.run(lambda: 1 / 0)
    ids, _, _ = await run(engine, "tiny", PROMPT, max_tokens=4, seed=1)  # still serving
    assert len(ids) == 4


def test_from_pretrained_leaves_the_callers_thread_without_torch_work(
    tiny_model_path: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Loading runs in a thread that has ended when from_pretrained returns (its OpenMP pool with it),
    and a loading error still reaches the caller."""
    import threading

    from art.engines.torch import torch_engine

    loaded_on: list[threading.Thread] = []
    real_load = torch_engine.load_model_and_tokenizer

    def spy(*args: Any, **kwargs: Any) -> Any:
        loaded_on.append(threading.current_thread())
        return real_load(*args, **kwargs)

    monkeypatch.setattr(torch_engine, "load_model_and_tokenizer", spy)
    eng = torch_engine.TorchEngine.from_pretrained(str(tiny_model_path), dtype="float32", num_threads=1)
    try:
        assert loaded_on[0] is not threading.current_thread()
        assert not loaded_on[0].is_alive()
    finally:
        asyncio.run(eng.close())
    with pytest.raises(Exception, match="no-such-model"):
        torch_engine.TorchEngine.from_pretrained(str(tmp_path / "no-such-model"))
