"""The built-in engine: a PyTorch model served with continuous batching and multi-LoRA, in-process.

`TorchEngine.from_pretrained(name)` loads the model and tokenizer (`loader`), takes references to its
weights (`llama_forward`), and starts the worker thread (`scheduler`). The same `hf_model` object is the
one the trainer wraps with PEFT and trains: the engine never copies base weights, and serves LoRA
checkpoints from their saved safetensors (`lora`), so both share one copy of the model in memory.

Names: the base model is served as `served_name` (default: the name it was loaded by); adapters under
the names they are loaded with (the service uses `{model}@{step}`); aliases map a name to one of those
(the service points `{model}` at the newest checkpoint). A request resolves its name once, when it is
submitted: replacing or unloading an adapter never changes a sequence already running, so every choice
comes from exactly one checkpoint (reported as `checkpoint_step`).

Threads: `generate`, `pause`, `resume`, `score` and `run` are coroutines that may be awaited from any
event loop (the server's thread and the trainer's loop alike); results come back to the caller's loop.
The adapter and alias methods are plain functions (reading an adapter from disk happens in the caller's
thread; the service calls them through `run`).

One thread computes. torch's CPU parallelism is OpenMP (libgomp), which gives every thread that starts
parallel work a pool of its own; once a process holds more pool threads than it has CPUs, libgomp cuts
every pool's spin-wait from ~300,000 to 100 iterations, so each of the ~400 parallel regions of a decode
step then sleeps and wakes its threads through the kernel. Measured on 2 cores (SmolLM2, 32 rows with an
adapter): 57-71 ms per decode step with one pool, 78-126 ms once a second thread had run one matmul. So
the worker thread is the only one that should ever run heavy torch work: `from_pretrained` loads in a
short-lived thread (a pool goes away with its thread), and `run(fn)` runs anything else there (the
service's training steps, checkpoint saves, adapter loads; benchmarks' baselines).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import AsyncGenerator, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import torch

from art.base_model.loader import choose_dtype, load_model_and_tokenizer
from art.chat.chat_template import ChatTemplate
from art.chat.grammar import GrammarCompiler, GrammarError
from art.common.waits import waiting
from art.engines.base import (
    ContextLengthError,
    GenerateOutput,
    GenerateRequest,
    InvalidRequestError,
    ModelNotFoundError,
    SamplingParams,
)
from art.engines.torch.decode_attention import compile_wanted
from art.engines.torch.kv_cache import SlotKVCache
from art.engines.torch.llama_forward import LlamaForward, LlamaWeights
from art.engines.torch.lora import LoraAdapter, LoraMixer, read_peft_adapter
from art.engines.torch.scheduler import Job, Scheduler
from art.engines.torch.scheduler import Sequence as EngineSequence
from art.kernels.cpu_env import bound_primitive_caches
from art.kernels.threads import in_fresh_thread
from art.types import RuntimeOptions

T = TypeVar("T")


def _stop_token_ids(model: Any, tokenizer: Any) -> list[int]:
    """End-of-turn ids: the generation config's eos ids, the tokenizer's eos, and ChatML's <|im_end|>."""
    ids: set[int] = set()
    for source in (getattr(model, "generation_config", None), model.config):
        eos = getattr(source, "eos_token_id", None)
        if isinstance(eos, int):
            ids.add(eos)
        elif isinstance(eos, list | tuple):
            ids.update(int(e) for e in eos)
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    if isinstance(im_end, int) and im_end != tokenizer.unk_token_id and im_end >= 0:
        ids.add(im_end)
    return sorted(ids)


def _context_window(config: Any, max_model_len: int | None) -> int:
    """The longest sequence served: `max_model_len` or the model's, within any sliding window."""
    window = int(getattr(config, "max_position_embeddings", 2048))
    sliding = getattr(config, "sliding_window", None)
    if sliding and getattr(config, "use_sliding_window", True):
        window = min(window, int(sliding))  # beyond it attention would differ; never go there
    return min(window, max_model_len) if max_model_len else window


class TorchEngine:
    """The built-in engine (implements `art.engines.base.Engine`; see the module docstring)."""

    def __init__(
        self,
        hf_model: Any,
        tokenizer: Any,
        *,
        served_name: str,
        max_num_seqs: int | None = None,
        max_model_len: int | None = None,
        prefill_token_budget: int = 2048,
        num_threads: int | None = None,
        release_cache_after_idle: float | None = 5.0,
        options: RuntimeOptions | None = None,
    ) -> None:
        options = options or RuntimeOptions()
        bound_primitive_caches(options.cpu_primitive_cache)  # before this engine's first matmul
        # One owner: RuntimeOptions (max_num_seqs, max_model_len); the keywords override it for this engine.
        max_num_seqs = options.max_num_seqs if max_num_seqs is None else max_num_seqs
        max_model_len = options.max_model_len if max_model_len is None else max_model_len
        self.hf_model = hf_model
        self.tokenizer = tokenizer
        self.chat_template = ChatTemplate(tokenizer)
        self.base_model_name = served_name
        self.max_model_len = _context_window(hf_model.config, max_model_len)
        self.max_num_seqs = max_num_seqs
        self._weights = LlamaWeights.from_hf(hf_model)
        self._forward = LlamaForward(
            self._weights,
            hf_model.config,
            max_positions=self.max_model_len,
            compile_kernels=compile_wanted(self._weights.embed.device, options.engine_compile),
            fold_adapters=options.fold_lora,
            native_bf16=options.native_bf16,
        )
        self._cache = SlotKVCache(
            num_layers=len(self._weights.layers),
            num_kv_heads=self._weights.num_kv_heads,
            head_dim=self._weights.head_dim,
            max_slots=max_num_seqs,
            max_positions=self.max_model_len,
            dtype=self._forward.dtype,
            device=self._forward.device,
        )
        self._lock = threading.Lock()
        self._adapters: dict[str, LoraAdapter] = {}
        self._aliases: dict[str, str] = {}
        self._score_mixer = LoraMixer(self._weights.out_sizes(), cache_size=1)
        stop_token_ids = _stop_token_ids(hf_model, tokenizer)
        # Structured outputs (`art.chat.grammar`): replaceable, e.g. by a benchmark comparing libraries.
        self.grammars = GrammarCompiler(
            tokenizer, vocab_size=int(self._weights.embed.shape[0]), stop_token_ids=stop_token_ids
        )
        self._scheduler = Scheduler(
            self._forward,
            self._cache,
            max_num_seqs=max_num_seqs,
            max_model_len=self.max_model_len,
            stop_token_ids=stop_token_ids,
            prefill_token_budget=prefill_token_budget,
            num_threads=num_threads,
            release_cache_after_idle=release_cache_after_idle,
            share_prefixes=options.share_prefixes,
        )

    @classmethod
    def from_pretrained(
        cls,
        base_model: str,
        *,
        served_name: str | None = None,
        dtype: str | torch.dtype | None = None,
        max_num_seqs: int | None = None,
        max_model_len: int | None = None,
        device: str | torch.device = "cpu",
        prefill_token_budget: int = 2048,
        num_threads: int | None = None,
        release_cache_after_idle: float | None = 5.0,
        options: RuntimeOptions | None = None,
    ) -> TorchEngine:
        """Load `base_model` (short name, HF id or local folder) and start serving it.

        dtype: None/"auto" picks bf16 where the hardware has it, else float32 (see `loader`).
        max_num_seqs: sequences decoded together; max_model_len: context window (default for both:
        `options`' values, `RuntimeOptions.max_num_seqs` and `.max_model_len`, the model's window when None).
        prefill_token_budget: padded prompt tokens per batched prefill (bounds the stall of running rows).
        num_threads: torch threads for the worker (default: torch's setting).
        release_cache_after_idle: seconds without any sequence after which the KV cache is freed (the next
        request allocates it again); None keeps it for the engine's life.
        options: the speed-up switches (`engine_compile`, `fold_lora`, `share_prefixes`); defaults: all on.

        The loading runs in a thread of its own that ends before this returns: the caller's thread does
        no parallel torch work (see the module docstring, "One thread computes").
        """

        def build() -> TorchEngine:
            model, tokenizer = load_model_and_tokenizer(
                base_model, dtype=choose_dtype(dtype, device), device=device
            )
            return cls(
                model,
                tokenizer,
                served_name=served_name or base_model,
                max_num_seqs=max_num_seqs,
                max_model_len=max_model_len,
                prefill_token_budget=prefill_token_budget,
                num_threads=num_threads,
                release_cache_after_idle=release_cache_after_idle,
                options=options,
            )

        return in_fresh_thread(build)

    # ---- names ----

    def model_names(self) -> list[str]:
        """The base model, loaded adapters and aliases."""
        with self._lock:
            return [self.base_model_name, *self._adapters, *self._aliases]

    def _resolve(self, name: str) -> tuple[str, LoraAdapter | None]:
        with self._lock:
            target = self._aliases.get(name, name)
            if target == self.base_model_name:
                return target, None
            adapter = self._adapters.get(target)
        if adapter is None:
            raise ModelNotFoundError(name)
        return target, adapter

    def load_adapter(
        self, name: str, path: str | os.PathLike[str], *, checkpoint_step: int | None = None
    ) -> None:
        """Serve the PEFT adapter in `path` as `name` (replacing a same-named one; running requests keep theirs).

        checkpoint_step: reported on every choice it produces; default: N from a name ending in "@N", else
        from a folder named by digits (checkpoints/0003), else None.
        """
        if name == self.base_model_name or name in self._aliases:
            raise ValueError(f"{name!r} already names the base model or an alias")
        adapter = read_peft_adapter(
            name,
            Path(path),
            shapes=self._weights.linear_shapes(),
            num_layers=len(self._weights.layers),
            dtype=self._forward.dtype,
            device=self._forward.device,
            checkpoint_step=checkpoint_step,
        )
        with self._lock:
            replaced = self._adapters.get(name)
            self._adapters[name] = adapter
        if replaced is not None:
            self._forward.forget_adapter(replaced)

    def unload_adapter(self, name: str) -> None:
        """Stop serving `name` and drop aliases pointing to it; raises ModelNotFoundError if not loaded."""
        with self._lock:
            adapter = self._adapters.pop(name, None)
            if adapter is None:
                raise ModelNotFoundError(name)
            self._aliases = {a: t for a, t in self._aliases.items() if t != name}
        self._forward.forget_adapter(adapter)

    def set_alias(self, alias: str, target: str) -> None:
        """Resolve `alias` to `target` (the base model or a loaded adapter) from now on."""
        with self._lock:
            if target != self.base_model_name and target not in self._adapters:
                raise ModelNotFoundError(target)
            if alias == self.base_model_name or alias in self._adapters:
                raise ValueError(f"{alias!r} already names the base model or an adapter")
            self._aliases[alias] = target

    # ---- generation ----

    async def generate(self, request: GenerateRequest) -> AsyncGenerator[GenerateOutput, None]:
        """Stream one sequence's tokens (use `contextlib.aclosing`: closing early aborts the sequence)."""
        model, adapter = self._resolve(request.model)
        prompt = list(request.prompt_token_ids)
        params = request.sampling
        self._check_token_ids(prompt)
        self._check_token_ids([*params.stop_token_ids, *params.logit_bias], what="stop_token_ids/logit_bias")
        matcher = None
        if (
            params.structured_outputs is not None
        ):  # compiled off this loop (the first one wraps the tokenizer)
            try:
                matcher = await asyncio.to_thread(self.grammars.matcher, params.structured_outputs)
            except GrammarError as exc:
                raise InvalidRequestError(f"structured outputs: {exc}") from None
        room = self.max_model_len - len(prompt)
        if room < 1:
            raise ContextLengthError(
                f"This model's maximum context length is {self.max_model_len} tokens; the prompt has "
                f"{len(prompt)} (at least one token must be left to generate)."
            )
        max_tokens = request.sampling.max_tokens
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[GenerateOutput | BaseException] = asyncio.Queue()
        seq = EngineSequence(
            prompt=prompt,
            adapter=adapter,
            model=model,
            params=params,
            max_new=room if max_tokens is None else min(room, max_tokens),
            loop=loop,
            sink=queue.put_nowait,
            matcher=matcher,
        )
        self._scheduler.submit(seq)
        try:
            while True:
                item = await queue.get()
                if isinstance(item, BaseException):
                    raise item
                yield item
                if item.finish_reason is not None:
                    return
        finally:
            if not seq.done:
                self._scheduler.abort(seq)

    def _check_token_ids(self, ids: list[int], what: str = "token ids") -> None:
        """Refuse ids outside the embedding table (they would fail the whole batch they joined)."""
        vocab = int(self._weights.embed.shape[0])
        if ids and (min(ids) < 0 or max(ids) >= vocab):
            raise InvalidRequestError(f"{what} must be in [0, {vocab}); got min {min(ids)}, max {max(ids)}")

    def release_idle_cache(self) -> int:
        """Free the KV cache if no sequence runs (the next request allocates it again, at the size it needs);
        the bytes released. Runs on the worker: call it through `run` (the service does, before each
        training step, so the step's peak memory holds no cache)."""
        return self._scheduler.release_idle_cache()

    async def pause(self) -> None:
        """Return once no forward pass runs; new and running requests are held until `resume`."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._scheduler.pause(loop, future)
        await future

    async def resume(self) -> None:
        """Let held requests continue."""
        self._scheduler.resume()

    async def score(self, model: str, token_ids: Sequence[int], *, as_generated: bool = False) -> list[float]:
        """Logprob of token_ids[i] given token_ids[:i] (i >= 1) under `model`; runs even while paused.

        By default with the exact LoRA arithmetic the trainer uses; `as_generated=True` with the weights
        generation uses (adapters folded into the base matmuls; the same numbers)."""
        _, adapter = self._resolve(model)
        ids = [int(t) for t in token_ids]
        self._check_token_ids(ids)
        if not 2 <= len(ids) <= self.max_model_len:
            raise ValueError(f"score needs 2..{self.max_model_len} token ids, got {len(ids)}")
        return await self.run(lambda: self._score_now(adapter, ids, as_generated))

    async def run(self, fn: Callable[[], T]) -> T:
        """fn() on the engine's worker thread, between decode steps (also while paused), outside
        inference mode; returns its result or raises its exception.

        Heavy torch work of this process belongs here rather than on another thread: a second thread's
        OpenMP pool slows every decode step (see the module docstring). Generation waits while fn runs.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._scheduler.run_job(Job(fn, loop, future))
        return await future

    @torch.inference_mode()
    def _score_now(self, adapter: LoraAdapter | None, ids: list[int], as_generated: bool) -> list[float]:
        tokens_1T = torch.tensor([ids], dtype=torch.int64, device=self._forward.device)
        lora = self._score_mixer.batch([adapter], self._forward.device)
        hidden_TE = self._forward.score_hidden(
            tokens_1T, torch.tensor([len(ids)], device=tokens_1T.device), lora, as_generated=as_generated
        )[0]
        out: list[float] = []
        for start in range(0, len(ids) - 1, 512):  # bounded memory for the [T, vocab] logits
            logits_CV = self._forward.logits(hidden_TE[start : min(start + 512, len(ids) - 1)])
            targets_C = tokens_1T[0, start + 1 : start + 1 + logits_CV.shape[0]]
            logprobs_C = torch.log_softmax(logits_CV, -1).gather(-1, targets_C[:, None]).squeeze(-1)
            out.extend(logprobs_C.tolist())
        return out

    async def warm_up(self) -> None:
        """Generate two tokens, so that the compiled kernels are built and checked now (`decode_attention`,
        `cpp_kernels`: ~1 minute the first time on a machine, then cached on disk) rather than during the
        first real requests."""
        ids = self.chat_template.render_ids([{"role": "user", "content": "Hi"}], add_generation_prompt=True)
        request = GenerateRequest(
            model=self.base_model_name,
            prompt_token_ids=ids,
            sampling=SamplingParams(max_tokens=2, ignore_eos=True),
        )
        with waiting("compiling the engine's kernels (about a minute the first time on a machine; cached)"):
            async with contextlib.aclosing(self.generate(request)) as outputs:
                async for _ in outputs:
                    pass

    async def close(self) -> None:
        """Stop the worker thread; unfinished requests fail with EngineClosedError."""
        await asyncio.to_thread(self._scheduler.close)

    @property
    def compute_dtype(self) -> str:
        """The dtype the engine computes in (e.g. "torch.bfloat16"); sets the canary's tolerance."""
        return str(self._forward.dtype)

    # ---- introspection (tests, benchmarks) ----

    @property
    def num_running(self) -> int:
        """Sequences currently holding a KV cache slot."""
        return self._scheduler.num_running

    @property
    def decode_steps(self) -> int:
        """Decode steps run so far."""
        return self._scheduler.steps

    @property
    def share_prefixes(self) -> bool:
        """Whether a prefix the prompts of one prefill share (a system prompt) is computed once for all of
        them (`RuntimeOptions.share_prefixes`, on by default; the results are the same either way, see
        `scheduler`). Settable, e.g. to compare."""
        return self._scheduler.share_prefixes

    @share_prefixes.setter
    def share_prefixes(self, value: bool) -> None:
        self._scheduler.share_prefixes = bool(value)

    @property
    def prefill_tokens(self) -> int:
        """Token positions prefills have computed so far (padding included; a shared prefix counts once)."""
        return self._scheduler.prefill_tokens

    def optimizations(self) -> dict[str, str]:
        """Which speed-ups are in use (known after the first decode step): oneDNN-packed weights, the decode
        attention kernel (cpp, inductor or eager), C++ element-wise kernels in decode steps, adapters folded
        into the base matmuls for generation."""
        forward = self._forward
        return {
            "packed weights": "on" if forward.pack_weights else "off",
            "decode attention": forward.decode_attention.kernel,
            "element-wise kernels": "C++" if forward._fast else "torch",
            "folded adapters": "on" if forward.folds_adapters else "off",
        }

    def phase_seconds(self) -> dict[str, float]:
        """Seconds the worker has spent in prefill, decode forward, sampling and handing out results."""
        return dict(self._scheduler.seconds)
