"""Continuous batching: the worker thread that runs every forward pass of the torch engine.

One thread owns the model's compute. Requests arrive from any event loop (the server's, the trainer's)
through a locked inbox; each iteration of the worker:

1. applies arrivals and aborts; runs queued jobs (`TorchEngine.run`: scoring, and the service's training
   steps, checkpoint saves and adapter loads), which run even while paused;
2. when paused, acknowledges the pause (so `pause()` returns) and sleeps until resumed: running sequences
   keep their KV cache and simply continue afterwards, waiting ones stay queued;
3. admits waiting sequences into free slots with ONE batched prefill (when nothing was running, it first
   lets a burst finish arriving: see `ARRIVAL_GAP`) (bounded by a token budget so running
   sequences are not stalled for long), sampling each new sequence's first token. Identical prompts
   for the same adapter (GRPO groups, `n` > 1) are prefilled once and their cache rows copied. Prompt
   starts are not computed twice: a prompt that continues a finished sequence (an agent's next turn:
   the conversation so far plus a new message) restores that sequence's keys and values from the prefix
   cache (`prefix_cache`), and the others, when they start with the same tokens (a system prompt, an
   agent's instructions and tools), compute that prefix once for all (`shared_prefix_length`); then one
   forward runs the rest of every prompt, each row from its own start;
4. runs ONE decode step for every running sequence: a [B] batch of last tokens, each at its own position;
5. hands the new tokens back with one `call_soon_threadsafe` per event loop, then drops finished sequences,
   moving the last row into each freed slot so rows stay 0..B-1 (see `kv_cache`).

A new request therefore waits at most one decode step plus one prefill to join, and nobody waits for an
unrelated long sequence. Per-row sampling state (last token, position, seed, counter, limits, temperature,
top_p) lives in preallocated tensors indexed by row, so a step does no Python work per row except handing
out its results. Generation runs under `torch.inference_mode()`, jobs outside it.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from art.chat.grammar import fill_bitmasks
from art.engines.base import EngineClosedError, FinishReason, GenerateOutput, SamplingParams
from art.engines.torch.kv_cache import SlotKVCache
from art.engines.torch.llama_forward import LlamaForward
from art.engines.torch.lora import LoraAdapter, LoraBatch, LoraMixer
from art.engines.torch.prefix_cache import PrefixCache, common_prefix
from art.engines.torch.sampling import (
    Workspace,
    apply_bitmask_,
    apply_penalties_,
    apply_top_k_min_p_,
    fast_sampling_usable,
    raw_logprobs,
    sample,
)

log = logging.getLogger(__name__)

Sink = Callable[[GenerateOutput | BaseException], None]

# Tokens a shared prefix must save ((uniques - 1) x its length) to be computed once. The extra one-row
# forward pass costs about what ~30 tokens of a batched prefill do (SmolLM2-135M, 2 cores): 128 leaves margin.
SHARED_PREFIX_MIN_SAVED = 128

# A burst of requests (a rollout's groups, an evaluation) reaches an idle engine over tens of milliseconds:
# the server parses and renders them one by one (32 streamed requests on 2 cores: all within 8-57 ms of the
# first). Prefilled as they came, the first one to five went alone (130-260 ms), then a decode step of those
# few, then the rest: ~800 ms before all 32 decoded together. So when nothing runs, the worker waits for
# the burst to end, until ARRIVAL_GAP passes without a new request or ARRIVAL_WINDOW since the first (gaps
# of 5-15 ms are common: a client in the same process takes the GIL for its switch interval); a lone request
# waits ARRIVAL_GAP more for its first token. While sequences run, arrivals join at the next step. In 5
# paired rounds of that load: 514 vs 476 tok/s (benchmarks/README.md).
ARRIVAL_GAP = 0.015
ARRIVAL_WINDOW = 0.1


@dataclass(eq=False)
class Sequence:
    """One sequence being generated; `sink` is called on `loop` with each output (or an exception)."""

    prompt: list[int]
    adapter: LoraAdapter | None
    model: str
    params: SamplingParams
    max_new: int
    loop: asyncio.AbstractEventLoop
    sink: Sink
    matcher: Any = None  # the grammar state (`art.chat.grammar.GrammarMatcher`) of a constrained sequence
    aborted: bool = False
    done: bool = False
    generated: list[int] = field(default_factory=list)  # tokens sampled so far
    counts_V: torch.Tensor | None = None  # per token id: times generated (penalties; made at first use)
    seen_V: torch.Tensor | None = None  # tokens of the prompt or output (repetition penalty)

    @property
    def special(self) -> bool:
        """Whether its logits are processed before sampling (`Scheduler._process_logits`)."""
        return self.matcher is not None or self.params.needs_processing

    @property
    def checkpoint_step(self) -> int | None:
        """Step of the adapter generating this sequence (None for the base model)."""
        return None if self.adapter is None else self.adapter.checkpoint_step


@dataclass(eq=False)
class Job:
    """A function to run in the worker thread between steps; its result goes to `future` on `loop`."""

    fn: Callable[[], Any]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]


@dataclass
class _PrefillPlan:
    """What one prefill admits and which starts of its prompts it does not compute again."""

    uniques: list[Sequence] = field(default_factory=list)
    duplicates: list[tuple[Sequence, int]] = field(default_factory=list)  # (sequence, index of its unique)
    reuse: list[tuple[int, int]] = field(default_factory=list)  # per unique: (prefix cache entry, positions)
    shared: int = 0  # a prefix the `sharing` uniques start with, computed once (0: none)
    sharing: list[int] = field(default_factory=list)  # uniques (indices) computing their start in the prefill

    def starts(self) -> list[int]:
        """Per unique: the positions already in its slot when the prefill's forward runs."""
        starts = [cached for _, cached in self.reuse]
        for i in self.sharing:
            starts[i] = self.shared
        return starts


@dataclass
class _Rows:
    """Per-row state of the running batch, row i = cache slot i (capacity = max_num_seqs)."""

    capacity: int
    device: torch.device
    last_token: torch.Tensor = field(init=False)
    length: torch.Tensor = field(init=False)  # tokens in the cache = position of the next input token
    generated: torch.Tensor = field(init=False)  # tokens sampled so far = RNG counter of the next one
    max_new: torch.Tensor = field(init=False)
    seed: torch.Tensor = field(init=False)
    temperature: torch.Tensor = field(init=False)
    top_p: torch.Tensor = field(init=False)
    stops: torch.Tensor = field(init=False)  # False where the request asked to ignore end-of-turn tokens

    def __post_init__(self) -> None:
        n, d = self.capacity, self.device
        for name in ("last_token", "length", "generated", "max_new", "seed"):
            setattr(self, name, torch.zeros(n, dtype=torch.int64, device=d))
        self.temperature = torch.ones(n, dtype=torch.float32, device=d)
        self.top_p = torch.ones(n, dtype=torch.float32, device=d)
        self.stops = torch.ones(n, dtype=torch.bool, device=d)

    def tensors(self) -> list[torch.Tensor]:
        return [
            self.last_token,
            self.length,
            self.generated,
            self.max_new,
            self.seed,
            self.temperature,
            self.top_p,
            self.stops,
        ]

    def move(self, src: int, dst: int) -> None:
        for t in self.tensors():
            t[dst] = t[src]


class Scheduler:
    """The continuous-batching worker (see the module docstring). Thread-safe entry points only."""

    def __init__(
        self,
        forward: LlamaForward,
        cache: SlotKVCache,
        *,
        max_num_seqs: int,
        max_model_len: int,
        stop_token_ids: list[int],
        prefill_token_budget: int = 2048,
        num_threads: int | None = None,
        release_cache_after_idle: float | None = 5.0,
        share_prefixes: bool = True,
        prefix_cache_entries: int = 32,
    ) -> None:
        self.forward = forward
        # Reuse prompt starts: kept from finished sequences (`prefix_cache`) or shared within a prefill.
        self.share_prefixes = share_prefixes
        self._prefix = PrefixCache(max_entries=prefix_cache_entries)
        self._prefix_version = forward.weights_version
        self.cache = cache
        self.max_num_seqs = max_num_seqs
        self.max_model_len = max_model_len
        self.prefill_token_budget = prefill_token_budget
        self.num_threads = num_threads
        self.release_cache_after_idle = release_cache_after_idle
        self._idle_since: float | None = None  # monotonic time the worker last found nothing to do
        self.device = forward.device
        self._stop_ids = torch.tensor(sorted(set(stop_token_ids)), dtype=torch.int64, device=self.device)
        self._cond = threading.Condition()
        self._inbox: list[Sequence] = []
        self._jobs: list[Job] = []
        self._pause_waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._paused = False
        self._closed = False
        self._waiting: deque[Sequence] = deque()
        self._running: list[Sequence] = []
        self._rows = _Rows(max_num_seqs, self.device)
        self._mixer = LoraMixer(forward.w.out_sizes())
        self._lora: LoraBatch | None = None
        self._top_k = 0
        self._workspace = Workspace()  # the sampler's reused [rows, vocab] buffers
        self._bitmask = torch.zeros(0, 0, dtype=torch.int32)  # grammar masks' buffer (`_grammar_masks`)
        self._fast_sampler: bool | None = None  # decided at the first sampling (`_fast_sampling`)
        self._composition_changed = True
        self.steps = 0
        self.prefill_tokens = 0  # token positions prefills computed, padding included (read by benchmarks)
        # Seconds the worker spent in each phase (read by benchmarks; a float add per phase per step).
        self.seconds = {"prefill": 0.0, "decode": 0.0, "sample": 0.0, "emit": 0.0}
        self._thread = threading.Thread(target=self._run, name="art-engine", daemon=True)
        self._thread.start()

    # ---- entry points (any thread) ----

    def submit(self, seq: Sequence) -> None:
        """Queue a sequence; raises EngineClosedError after close()."""
        with self._cond:
            if self._closed:
                raise EngineClosedError("the engine is closed")
            self._inbox.append(seq)
            self._cond.notify()

    def abort(self, seq: Sequence) -> None:
        """Stop generating `seq` (it is dropped at the next step; no more outputs are sent)."""
        seq.aborted = True
        with self._cond:
            self._cond.notify()

    def run_job(self, job: Job) -> None:
        """Run `job.fn` in the worker thread between steps (also while paused), with autograd as the
        caller would have it (generation alone runs under `torch.inference_mode()`)."""
        with self._cond:
            if self._closed:
                raise EngineClosedError("the engine is closed")
            self._jobs.append(job)
            self._cond.notify()

    def pause(self, loop: asyncio.AbstractEventLoop, future: asyncio.Future[None]) -> None:
        """Ask the worker to stop between steps; `future` resolves once it has."""
        with self._cond:
            self._paused = True
            self._pause_waiters.append((loop, future))
            self._cond.notify()

    def resume(self) -> None:
        """Let the worker continue."""
        with self._cond:
            self._paused = False
            self._cond.notify()

    def close(self) -> None:
        """Stop the worker; every unfinished sequence and job fails with EngineClosedError."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=30)

    def release_idle_cache(self) -> int:
        """On the worker (a job): drop the KV cache if no sequence holds a slot; the bytes released (0 if
        some do, e.g. requests held by a pause)."""
        if threading.current_thread() is not self._thread:
            raise RuntimeError("release_idle_cache runs on the engine's worker (as a job)")
        return 0 if self._running else self.cache.release() + self._prefix.clear()

    @property
    def num_running(self) -> int:
        """Sequences holding a slot."""
        return len(self._running)

    # ---- the worker ----

    def _run(self) -> None:
        if self.num_threads:
            torch.set_num_threads(self.num_threads)
        while True:
            try:
                if not self._next_iteration():
                    return
            except Exception as exc:  # never let the worker die: fail what was running, go on
                log.exception("engine worker iteration failed")
                self._fail_running(exc)

    def _next_iteration(self) -> bool:
        with self._cond:
            self._waiting.extend(self._inbox)
            self._inbox.clear()
            jobs, self._jobs = self._jobs, []
            if self._closed:
                self._fail_everything(EngineClosedError("the engine is closed"), jobs)
                return False
            # Between steps: every pending pause() may return (even one a resume() already overtook).
            self._ack_pause()
            if not jobs:
                if self._paused:
                    self._cond.wait()
                    return True
                if not self._running and not self._waiting:
                    self._wait_idle()
                    return True
            self._idle_since = None
            if not self._running and self._waiting and not jobs and not self._paused:
                self._await_burst()
        for job in jobs:
            self._run_job(job)
        if self._paused:
            return True
        try:
            # Everything that touches the KV cache or the row tensors runs in inference mode, dropping aborted
            # sequences included: it moves the last row into each freed slot, an in-place update of inference
            # tensors, which outside this mode raised and failed every running sequence (a client that
            # dropped its stream failed all the others).
            with torch.inference_mode():
                self._drop_aborted()
                if self._waiting and len(self._running) < self.max_num_seqs:
                    self._prefill()
                if self._running:
                    self._decode()
        except Exception as exc:  # a failed step fails its sequences, never the worker
            log.exception("engine step failed")
            self._fail_running(exc)
        return True

    def _await_burst(self) -> None:
        """Requests arrived at an idle worker (lock held): take more while they keep coming (`ARRIVAL_GAP`),
        so one prefill admits the whole burst; anything else that wakes the worker ends the wait."""
        deadline = time.monotonic() + ARRIVAL_WINDOW
        while len(self._waiting) < self.max_num_seqs:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            self._cond.wait(timeout=min(ARRIVAL_GAP, remaining))
            if not self._inbox or self._closed or self._paused or self._jobs:
                return
            self._waiting.extend(self._inbox)
            self._inbox.clear()

    def _wait_idle(self) -> None:
        """Nothing runs or waits (lock held): sleep until something arrives, and once the worker has been
        idle for `release_cache_after_idle` seconds, free the KV cache (the next request allocates it again
        at the size it needs). Short gaps, such as an agent's turn between two requests, keep it."""
        now = time.monotonic()
        if self._idle_since is None:
            self._idle_since = now
        if self.release_cache_after_idle is None or self.cache.nbytes() + self._prefix.nbytes() == 0:
            self._cond.wait()
            return
        remaining = self._idle_since + self.release_cache_after_idle - now
        if remaining > 0:
            self._cond.wait(timeout=remaining)
        else:
            self.cache.release()
            self._prefix.clear()

    def _ack_pause(self) -> None:
        for loop, future in self._pause_waiters:
            _call_soon(loop, _set_result, future, None)
        self._pause_waiters.clear()

    def _run_job(self, job: Job) -> None:
        try:
            result = job.fn()
        except Exception as exc:
            _call_soon(job.loop, _set_exception, job.future, exc)
        else:
            _call_soon(job.loop, _set_result, job.future, result)

    def _drop_aborted(self) -> None:
        if any(s.aborted for s in self._waiting):
            self._waiting = deque(s for s in self._waiting if not s.aborted)
        self._remove_rows([i for i, s in enumerate(self._running) if s.aborted])

    def _remove_rows(self, rows: list[int]) -> None:
        """Free the given rows, moving the last running row into each freed slot (descending order)."""
        for row in sorted(rows, reverse=True):
            last = len(self._running) - 1
            if row != last:
                self.cache.move(last, row, int(self._rows.length[last]))
                self._rows.move(last, row)
                self._running[row] = self._running[last]
            self._running.pop()
            self._composition_changed = True

    def _select_prefill(self) -> _PrefillPlan:
        """Waiting sequences to admit now, and how their prompts' starts are reused (`_PrefillPlan`).

        FIFO; a new unique prompt joins only while the token positions the prefill computes (a shared prefix
        once, plus uniques x the longest remaining part of a prompt) fit the token budget (the first always
        does); duplicates of an admitted prompt only need a free slot. A prompt whose start a finished
        sequence left in the prefix cache restores it; the others may share a common prefix, run once.
        """
        plan = _PrefillPlan()
        free = self.max_num_seqs - len(self._running)
        index_of: dict[tuple[int, tuple[int, ...]], int] = {}
        reused_longest = 0  # longest remaining part among prompts restoring a cached start
        plain_longest = plain_shortest = common = 0  # among the others (`plan.sharing` candidates)
        while self._waiting and len(plan.uniques) + len(plan.duplicates) < free:
            seq = self._waiting[0]
            uid = 0 if seq.adapter is None else seq.adapter.uid
            key = (uid, tuple(seq.prompt))
            if key in index_of:
                plan.duplicates.append((seq, index_of[key]))
                self._waiting.popleft()
                continue
            n = len(seq.prompt)
            entry, cached = self._prefix.match(seq.prompt, uid) if self.share_prefixes else (-1, 0)
            new_reused, new_plain, new_common = reused_longest, plain_longest, common
            new_shortest, plain_count = plain_shortest, len(plan.sharing)
            if entry >= 0:
                new_reused = max(reused_longest, n - cached)
            else:
                plain_count += 1
                if plain_count == 1:
                    new_plain, new_shortest, new_common = n, n, n
                else:
                    first = plan.uniques[plan.sharing[0]]
                    new_plain, new_shortest = max(plain_longest, n), min(plain_shortest, n)
                    same = seq.adapter is first.adapter
                    new_common = common_prefix(first.prompt, seq.prompt, common) if same else 0
            shared = shared_prefix_length(plain_count, new_common, min_prompt=new_shortest)
            shared = shared if self.share_prefixes else 0
            computed = shared + (len(plan.uniques) + 1) * max(new_reused, new_plain - shared)
            if plan.uniques and computed > self.prefill_token_budget:
                break
            index_of[key] = len(plan.uniques)
            if entry < 0:
                plan.sharing.append(len(plan.uniques))
            plan.uniques.append(seq)
            plan.reuse.append((entry, cached))
            reused_longest, plain_longest, plain_shortest, common = (
                new_reused,
                new_plain,
                new_shortest,
                new_common,
            )
            self._waiting.popleft()
        plan.shared = shared_prefix_length(len(plan.sharing), common, min_prompt=plain_shortest)
        if not self.share_prefixes or not plan.shared:
            plan.shared, plan.sharing = 0, []
        return plan

    def _prefill(self) -> None:
        start = time.perf_counter()
        self.forward.sync_weights()
        if self.forward.weights_version != self._prefix_version:  # new weights: kept keys/values are stale
            self._prefix.clear()
            self._prefix_version = self.forward.weights_version
        plan = self._select_prefill()
        uniques = plan.uniques
        seqs = uniques + [s for s, _ in plan.duplicates]
        source = list(range(len(uniques))) + [u for _, u in plan.duplicates]  # unique prompt of each row
        first, U = len(self._running), len(uniques)
        starts = plan.starts()
        T = max(len(s.prompt) - c for s, c in zip(uniques, starts, strict=True))  # longest part to run
        try:
            self.cache.ensure(
                first + len(seqs),
                max(len(s.prompt) for s in uniques) + 1,
                self._rows.length[:first],  # only running rows hold data; new ones are filled below
            )
            lora = self._mixer.batch([s.adapter for s in uniques], self.device)
            for i, (entry, cached) in enumerate(plan.reuse):  # starts kept from finished sequences
                if entry >= 0:
                    self._prefix.restore(entry, cached, self.cache, first + i)
            if plan.shared:  # a common prefix once, into the first such row, copied to the others
                head = uniques[plan.sharing[0]]
                prefix_1P = torch.tensor([head.prompt[: plan.shared]], dtype=torch.int64, device=self.device)
                one = self._mixer.batch([head.adapter], self.device)
                length_1 = torch.tensor([plan.shared], device=self.device)
                self.forward.prefill(prefix_1P, length_1, one, self.cache, first + plan.sharing[0])
                self.cache.share(first + plan.sharing[0], [first + i for i in plan.sharing[1:]], plan.shared)
            tokens_UT = torch.zeros(U, T, dtype=torch.int64)
            for i, (s, c) in enumerate(zip(uniques, starts, strict=True)):
                tokens_UT[i, : len(s.prompt) - c] = torch.tensor(s.prompt[c:], dtype=torch.int64)
            lengths_U = torch.tensor([len(s.prompt) - c for s, c in zip(uniques, starts, strict=True)])
            logits_UV = self.forward.prefill(
                tokens_UT.to(self.device),
                lengths_U.to(self.device),
                lora,
                self.cache,
                first,
                start=torch.tensor(starts, dtype=torch.int64, device=self.device),
            )
            self.prefill_tokens += plan.shared + U * T
            # Rows first..first+U-1 hold the uniques; duplicates get copies of their unique's cache row.
            for j in range(U, len(seqs)):
                self.cache.move(first + source[j], first + j, len(seqs[j].prompt))
        except Exception as exc:
            for s in seqs:
                self._fail(s, exc)
            raise
        rows = slice(first, first + len(seqs))
        r = self._rows
        r.length[rows] = torch.tensor([len(s.prompt) for s in seqs])
        r.generated[rows] = 0
        r.max_new[rows] = torch.tensor([s.max_new for s in seqs])
        r.seed[rows] = torch.tensor([s.params.seed for s in seqs])
        r.temperature[rows] = torch.tensor([s.params.temperature for s in seqs], dtype=torch.float32)
        r.top_p[rows] = torch.tensor([s.params.top_p for s in seqs], dtype=torch.float32)
        r.stops[rows] = torch.tensor([not s.params.ignore_eos for s in seqs])
        self._running.extend(seqs)
        self._composition_changed = True
        logits_NV = logits_UV if len(seqs) == U else logits_UV[torch.tensor(source, device=self.device)]
        self.seconds["prefill"] += time.perf_counter() - start
        self._sample_and_emit(logits_NV, rows, max(s.params.top_logprobs for s in seqs))

    def _refresh_composition(self) -> None:
        if self._composition_changed:
            self._lora = self._mixer.batch([s.adapter for s in self._running], self.device)
            self._top_k = max((s.params.top_logprobs for s in self._running), default=0)
            self._composition_changed = False

    def _decode(self) -> None:
        self._refresh_composition()
        B = len(self._running)
        r = self._rows
        positions_B = r.length[:B]
        attend_len = int(positions_B.max()) + 1
        self.cache.ensure(B, attend_len, positions_B)
        start = time.perf_counter()
        logits_BV = self.forward.decode(r.last_token[:B], positions_B, attend_len, self._lora, self.cache)
        self.seconds["decode"] += time.perf_counter() - start
        r.length[:B] += 1
        self.steps += 1
        self._sample_and_emit(logits_BV, slice(0, B), self._top_k)

    def _fast_sampling(self) -> bool:
        """Sample with the C++ kernel: wherever the engine's other C++ kernels run (`fast_kernels`, off with
        `engine_compile="off"`) and the float32 kernels pass their check here."""
        if self._fast_sampler is None:
            self._fast_sampler = self.forward.fast_kernels() and fast_sampling_usable(self.device)
        return self._fast_sampler

    def _sample_and_emit(self, logits_NV: torch.Tensor, rows: slice, top_k: int) -> None:
        """Sample the next token of the given rows, send it to each sequence, drop the finished ones."""
        r = self._rows
        seqs = self._running[rows]
        start = time.perf_counter()
        special = [i for i, s in enumerate(seqs) if s.special]
        raw_SV = self._process_logits(logits_NV, [seqs[i] for i in special], special) if special else None
        result = sample(
            logits_NV,
            r.temperature[rows],
            r.top_p[rows],
            r.seed[rows],
            r.generated[rows],
            top_k,
            self._workspace,
            fast=self._fast_sampling(),
        )
        if raw_SV is not None:
            self._report_raw(result, raw_SV, special, top_k)
        sampled = time.perf_counter()
        self.seconds["sample"] += sampled - start
        r.last_token[rows] = result.token_ids_B
        r.generated[rows] += 1
        finished_N = torch.isin(result.token_ids_B, self._stop_ids) & r.stops[rows]
        length_hit_N = r.generated[rows] >= r.max_new[rows]
        ids, logprobs, stops, lengths = host_lists(
            result.token_ids_B, result.logprobs_B, finished_N, length_hit_N
        )
        for i in special:
            if self._advance_special(seqs[i], ids[i]):
                stops[i] = True
        top_ids = top_lps = None
        if result.top_ids_BK is not None and result.top_logprobs_BK is not None:
            top_ids, top_lps = host_lists(result.top_ids_BK, result.top_logprobs_BK)

        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[Sequence, GenerateOutput]]] = {}
        finished_rows: list[int] = []
        for i, seq in enumerate(seqs):
            reason: FinishReason | None = "stop" if stops[i] else ("length" if lengths[i] else None)
            tops = None
            if seq.params.top_logprobs and top_ids is not None and top_lps is not None:
                k = seq.params.top_logprobs
                tops = [list(zip(top_ids[i][:k], top_lps[i][:k], strict=True))]
            out = GenerateOutput([ids[i]], [logprobs[i]], tops, reason, seq.model, seq.checkpoint_step)
            by_loop.setdefault(seq.loop, []).append((seq, out))
            seq.generated.append(ids[i])
            if reason is not None:
                seq.done = True
                finished_rows.append(rows.start + i)
                if self.share_prefixes:
                    self._retain(seq, rows.start + i)
        # Finished rows go before anyone hears of the outputs: a caller that has its last token never sees
        # its sequence still counted in `num_running`.
        self._remove_rows(finished_rows)
        for loop, items in by_loop.items():
            if not _call_soon(loop, _deliver, items):
                for seq, _ in items:  # nobody is listening any more
                    seq.aborted = True
        self.seconds["emit"] += time.perf_counter() - sampled

    # ---- logit processing: sampling fields beyond temperature/top_p, and grammars ----

    def _process_logits(
        self, logits_NV: torch.Tensor, seqs: list[Sequence], special: list[int]
    ) -> torch.Tensor:
        """Apply the special rows' logit_bias, penalties, grammar masks, top_k and min_p to `logits_NV` in
        place (`sampling`); returns those rows' raw logits [S, V], from which their logprobs are reported."""
        V = logits_NV.shape[1]
        device = logits_NV.device
        index_S = torch.tensor(special, dtype=torch.int64, device=device)
        raw_SV = logits_NV.index_select(0, index_S)
        work_SV = raw_SV.clone()
        params = [s.params for s in seqs]
        for j, p in enumerate(params):
            if p.logit_bias:
                ids = torch.tensor(list(p.logit_bias), dtype=torch.int64, device=device)
                work_SV[j].index_add_(0, ids, torch.tensor(list(p.logit_bias.values()), device=device))
        penalized = [j for j, p in enumerate(params) if _has_penalty(p)]
        if penalized:
            self._apply_penalties(work_SV, [seqs[j] for j in penalized], penalized, V)
        constrained = [j for j, s in enumerate(seqs) if s.matcher is not None]
        if constrained:
            bitmask_CW = self._grammar_masks([seqs[j] for j in constrained], V)
            rows = torch.tensor(constrained, dtype=torch.int64, device=device)
            masked_CV = work_SV.index_select(0, rows)
            apply_bitmask_(masked_CV, bitmask_CW.to(device))
            work_SV.index_copy_(0, rows, masked_CV)
        if any(p.top_k or p.min_p for p in params):
            apply_top_k_min_p_(
                work_SV,
                torch.tensor([p.top_k for p in params], dtype=torch.int64, device=device),
                torch.tensor([p.min_p for p in params], dtype=torch.float32, device=device),
                torch.tensor([p.temperature for p in params], dtype=torch.float32, device=device),
            )
        logits_NV.index_copy_(0, index_S, work_SV)
        return raw_SV

    def _apply_penalties(self, work_SV: torch.Tensor, seqs: list[Sequence], rows: list[int], V: int) -> None:
        device = work_SV.device
        for s in seqs:  # per-sequence counts, made at its first processed step and updated as it samples
            if s.counts_V is None:
                s.counts_V = torch.zeros(V, dtype=torch.int32, device=device)
                if s.generated:
                    s.counts_V.index_add_(
                        0,
                        torch.tensor(s.generated, device=device),
                        torch.ones(len(s.generated), dtype=torch.int32, device=device),
                    )
            if s.params.repetition_penalty != 1.0 and s.seen_V is None:
                s.seen_V = torch.zeros(V, dtype=torch.bool, device=device)
                s.seen_V[torch.tensor(s.prompt + s.generated, device=device)] = True
        index = torch.tensor(rows, dtype=torch.int64, device=device)
        part_PV = work_SV.index_select(0, index)
        repetition = any(s.seen_V is not None for s in seqs)
        apply_penalties_(
            part_PV,
            torch.stack([s.counts_V for s in seqs if s.counts_V is not None]),
            torch.stack(
                [
                    s.seen_V if s.seen_V is not None else torch.zeros(V, dtype=torch.bool, device=device)
                    for s in seqs
                ]
            )
            if repetition
            else None,
            torch.tensor([s.params.repetition_penalty for s in seqs], device=device),
            torch.tensor([s.params.presence_penalty for s in seqs], device=device),
            torch.tensor([s.params.frequency_penalty for s in seqs], device=device),
        )
        work_SV.index_copy_(0, index, part_PV)

    def _grammar_masks(self, seqs: list[Sequence], V: int) -> torch.Tensor:
        """The next-token bitmasks [C, words] of constrained sequences (a matcher that allows nothing, e.g.
        after an error, gets the end-of-turn tokens so its sequence ends)."""
        words = (V + 31) // 32
        if self._bitmask.shape[0] < len(seqs) or self._bitmask.shape[1] != words:
            self._bitmask = torch.zeros(max(len(seqs), self.max_num_seqs), words, dtype=torch.int32)
        bitmask_CW = self._bitmask[: len(seqs)]
        fill_bitmasks([s.matcher for s in seqs], bitmask_CW)
        empty_C = (bitmask_CW == 0).all(-1)
        if bool(empty_C.any()):
            for j in empty_C.nonzero().flatten().tolist():
                log.warning(
                    "grammar allows no token (%s); ending the sequence", seqs[j].matcher.error or "done"
                )
                for t in self._stop_ids.tolist():
                    bitmask_CW[j, t // 32] |= _bit(t % 32)
        return bitmask_CW

    def _report_raw(self, result: Any, raw_SV: torch.Tensor, special: list[int], top_k: int) -> None:
        """Replace the special rows' logprobs (and top alternatives) by the raw logits' ones."""
        index_S = torch.tensor(special, dtype=torch.int64, device=raw_SV.device)
        sampled_S, top_ids_SK, top_lps_SK = raw_logprobs(raw_SV, result.token_ids_B[index_S], top_k)
        result.logprobs_B[index_S] = sampled_S.to(result.logprobs_B.dtype)
        if top_ids_SK is not None and top_lps_SK is not None and result.top_ids_BK is not None:
            result.top_ids_BK[index_S] = top_ids_SK
            result.top_logprobs_BK[index_S] = top_lps_SK.to(result.top_logprobs_BK.dtype)

    def _advance_special(self, seq: Sequence, token: int) -> bool:
        """After a special row sampled `token`: update its counts and grammar; True if it ends the sequence
        (one of its `stop_token_ids`, or a token its grammar refused)."""
        if seq.counts_V is not None:
            seq.counts_V[token] += 1
        if seq.seen_V is not None:
            seq.seen_V[token] = True
        if seq.matcher is not None and not seq.matcher.consume(token):
            log.warning("grammar refused a sampled token (%s); ending the sequence", seq.matcher.error)
            return True
        return token in seq.params.stop_token_ids

    def _retain(self, seq: Sequence, row: int) -> None:
        """Keep a finished sequence's cached positions (its prompt and all but its last token) for later
        prompts that start the same way; a failure here only costs that reuse, never the request."""
        cached = (seq.prompt + seq.generated)[: len(seq.prompt) + len(seq.generated) - 1]
        try:
            self._prefix.retain(self.cache, row, cached, 0 if seq.adapter is None else seq.adapter.uid)
        except Exception:  # e.g. out of memory growing the pool: go on without the kept starts
            log.warning(
                "could not keep a finished sequence's prompt start; clearing the prefix cache", exc_info=True
            )
            self._prefix.clear()

    # ---- failures ----

    def _fail(self, seq: Sequence, exc: BaseException) -> None:
        if not seq.done:
            seq.done = True
            _call_soon(seq.loop, _deliver_error, seq, exc)

    def _fail_running(self, exc: BaseException) -> None:
        for seq in self._running:
            self._fail(seq, exc)
        self._running.clear()
        self._composition_changed = True

    def _fail_everything(self, exc: BaseException, jobs: list[Job]) -> None:
        self._fail_running(exc)
        for seq in self._waiting:
            self._fail(seq, exc)
        self._waiting.clear()
        for job in jobs:
            _call_soon(job.loop, _set_exception, job.future, exc)
        self._ack_pause()


def _has_penalty(p: SamplingParams) -> bool:
    return bool(p.repetition_penalty != 1.0 or p.presence_penalty or p.frequency_penalty)


def _bit(j: int) -> int:
    """Bit j of an int32 word, as a signed int32 value (bit 31 is negative)."""
    return (1 << j) - (1 << 32) if j == 31 else 1 << j


def shared_prefix_length(uniques: int, common: int, *, min_prompt: int) -> int:
    """How much of a `common`-token prefix that `uniques` distinct prompts (the shortest `min_prompt` tokens)
    start with to compute once for all of them; 0 when sharing does not pay.

    At most min_prompt - 1, so every prompt keeps a token of its own (its logits start its generation).
    Sharing costs one more forward pass (of one row) and a copy, and saves (uniques - 1) x prefix tokens of
    compute, which must reach SHARED_PREFIX_MIN_SAVED.
    """
    prefix = min(common, min_prompt - 1)
    if uniques < 2 or prefix <= 0 or (uniques - 1) * prefix < SHARED_PREFIX_MIN_SAVED:
        return 0
    return prefix


def _call_soon(loop: asyncio.AbstractEventLoop, fn: Callable[..., None], *args: Any) -> bool:
    """Schedule fn(*args) on `loop` from the worker; False when that loop is already closed."""
    try:
        loop.call_soon_threadsafe(fn, *args)
    except RuntimeError:
        return False
    return True


def _deliver(items: list[tuple[Sequence, GenerateOutput]]) -> None:
    for seq, out in items:
        if not seq.aborted:
            seq.sink(out)


def _deliver_error(seq: Sequence, exc: BaseException) -> None:
    if not seq.aborted:
        seq.sink(exc)


def _set_result(future: asyncio.Future[Any], value: Any) -> None:
    if not future.done():
        future.set_result(value)


def _set_exception(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)


def host_lists(*tensors: torch.Tensor, one_copy: bool | None = None) -> list[Any]:
    """`t.tolist()` for each tensor. On an accelerator (or `one_copy=True`) every tensor crosses to the host
    in one copy, so a decode step waits for the device once, not once per tensor; on CPU, `tolist` each.

    Example:
        ids, stops = host_lists(token_ids_B, finished_B)  # [5, 7], [False, True]
    """
    if not (tensors[0].device.type != "cpu" if one_copy is None else one_copy):
        return [t.tolist() for t in tensors]
    flat = torch.cat([t.reshape(-1).to(torch.float64) for t in tensors]).cpu()
    out: list[Any] = []
    offset = 0
    for t in tensors:
        part = flat[offset : offset + t.numel()].reshape(t.shape)
        offset += t.numel()
        out.append(part.to(t.dtype).tolist())
    return out
