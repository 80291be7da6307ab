"""One trainable model's heavy side: engine + trainer + the step lifecycle.

A training step, in order (DESIGN.md section 3, step 6):

1. pause inference (new requests wait, none fail);
2. train one step on the LoRA adapter (on the engine's worker thread, the only one that computes; the
   event loop stays free);
3. save `checkpoints/{step:04d}` atomically: written to a temp folder, manifest last, then renamed;
4. load it into the engine as `{name}@{step}`;
5. canary: the engine's logprobs on a fixed probe must equal the trainer's within a tolerance, otherwise
   the step fails loudly and the new step is not published;
6. publish (`{name}` now aliases `{name}@{step}`) and resume inference.

The service depends on the `Engine` protocol only (`art.engines.base`); `RuntimeOptions.engine` picks the
engine (`art.engines.factory`). The trainer owns the base model the service loads; the built-in torch engine,
which runs in this process, serves that same object (one copy of the base weights: the trainer wraps it
with PEFT in place). A restarted service resumes from the newest complete checkpoint, optimizer state
included, after cleaning leftovers of interrupted saves.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..kernels.allocator import release_freed_memory, release_if_short
from ..storage import ModelStorage
from ..trajectories import TrajectoryGroup
from ..types import LoRAConfig, RuntimeOptions, TrainResult, TrainSpec

if TYPE_CHECKING:
    from ..engines.base import Engine
    from ..training.trainer import Trainer

logger = logging.getLogger(__name__)

# A fixed conversation whose tokens the canary scores with both the engine and the trainer.
CANARY_PROBE = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What is 2 + 2? Answer briefly."},
    {"role": "assistant", "content": "2 + 2 = 4. Tic-tac-toe move: B2."},
]
ADAPTERS_KEPT_LOADED = 2  # the newest steps stay servable; older ones are unloaded (still on disk)

StepEvents = Callable[[str, dict[str, Any]], None]
"""`on_event(kind, data)` of `ModelService.train`: how a step reports its progress as it goes."""


class CanaryError(RuntimeError):
    """The served adapter does not compute what the trainer computes: the new step is not published."""


@dataclass
class ServiceConfig:
    """How to build a model's service: its base model, its adapter, and how it runs."""

    base_model: str
    lora: LoRAConfig
    options: RuntimeOptions = field(default_factory=RuntimeOptions)


def canary_tolerance_for(dtype_name: str) -> float:
    """Mean absolute logprob difference tolerated between engine and trainer for a dtype."""
    return 1e-3 if "32" in dtype_name else 0.05


class ModelService:
    """The engine, the trainer and the checkpoints of one trainable model."""

    def __init__(self, name: str, storage: ModelStorage, config: ServiceConfig) -> None:
        self.name = name
        self.storage = storage
        self.config = config
        self.step = 0
        self.engine: Engine | None = None
        self.trainer: Trainer | None = None
        self._lock = asyncio.Lock()
        self._loaded_steps: list[int] = []

    async def _on_engine_thread(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """fn(*args, **kwargs) where the engine runs the service's heavy work (`Engine.run`). The torch
        engine runs it on its worker thread: a second computing thread would slow every decode step (see
        `torch_engine`, "One thread computes"), and a trainer thread of its own kept a malloc arena
        holding a step's peak memory (seen: 17 GB RSS after 8 demo steps)."""
        if self.engine is None:
            raise RuntimeError(f"the service of {self.name!r} is not started")
        return await self.engine.run(functools.partial(fn, *args, **kwargs))

    # ---- start -------------------------------------------------------------------------------
    async def start(self) -> None:
        """Load the model, start the engine, build the trainer, and resume from the newest complete checkpoint."""
        from ..base_model.loader import choose_dtype, load_model_and_tokenizer, resolve_device
        from ..chat.chat_template import ChatTemplate
        from ..engines.factory import check_engine_available, start_engine
        from ..kernels import cpp_kernels
        from ..kernels.threads import in_fresh_thread
        from ..training.trainer import Trainer

        options = self.config.options
        check_engine_available(options)  # e.g. engine="vllm" without vLLM: fails before anything loads
        device = resolve_device(options.device)
        dtype = choose_dtype(options.dtype, device)
        cpp_kernels.allow_native_bf16(options.native_bf16)
        base_model = self.config.base_model
        model, tokenizer = await asyncio.to_thread(  # off the event loop, in a thread that ends with it
            in_fresh_thread, lambda: load_model_and_tokenizer(base_model, dtype=dtype, device=device)
        )
        self.engine = await start_engine(
            options, base_model=base_model, served_name=base_model, model=model, tokenizer=tokenizer
        )
        self.trainer = await self._on_engine_thread(
            Trainer, model, ChatTemplate(tokenizer), self.config.lora, seed=options.seed, options=options
        )
        removed = self.storage.clean_incomplete_checkpoints()
        if removed:
            logger.warning(
                "removed %d incomplete checkpoint folder(s) left by an interrupted save: %s",
                len(removed),
                ", ".join(p.name for p in removed),
            )
        latest = self.storage.latest_checkpoint_step()
        if latest is None:
            await self._on_engine_thread(self._save_checkpoint, 0, {"note": "untrained adapter"})
            latest = 0
        else:
            await self._on_engine_thread(self._require()[1].load, self.storage.checkpoint_dir(latest))
        await self._on_engine_thread(self._load_into_engine, latest)
        self.step = latest
        t = time.perf_counter()
        await self.engine.warm_up()
        logger.info("engine warmed up (compiled kernels ready) in %.1f s", time.perf_counter() - t)

    def served_name(self, step: int) -> str:
        return f"{self.name}@{step}"

    def _require(self) -> tuple[Engine, Trainer]:
        if self.engine is None or self.trainer is None:
            raise RuntimeError(f"the service of {self.name!r} is not started")
        return self.engine, self.trainer

    def _save_checkpoint(self, step: int, manifest: dict[str, Any]) -> None:
        _, trainer = self._require()
        tmp = self.storage.new_checkpoint_tmp_dir(step)
        try:
            trainer.save(tmp)
            self.storage.commit_checkpoint(
                tmp,
                step,
                {"model": self.name, "base_model": self.config.base_model, **manifest},
            )
        except BaseException:
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
            raise

    def _load_into_engine(self, step: int) -> None:
        engine, _ = self._require()
        engine.load_adapter(self.served_name(step), self.storage.checkpoint_dir(step), checkpoint_step=step)
        self._loaded_steps.append(step)

    def _publish(self, step: int) -> None:
        engine, _ = self._require()
        engine.set_alias(self.name, self.served_name(step))
        self.step = step
        while len(self._loaded_steps) > ADAPTERS_KEPT_LOADED:
            old = self._loaded_steps.pop(0)
            if old != step:
                engine.unload_adapter(self.served_name(old))

    # ---- the step ----------------------------------------------------------------------------
    async def train(
        self,
        groups: Sequence[TrajectoryGroup],
        spec: TrainSpec,
        *,
        progress: bool = True,
        on_event: StepEvents | None = None,
    ) -> TrainResult:
        """Take one step; returns the new step and its metrics (or the old step and why nothing trained).

        `on_event(kind, data)`, if given, hears the step as it goes: "progress" after each micro-batch
        (`{"micro_batch", "total", "loss"}`, called on the engine's thread), "checkpoint_saved"
        (`{"step"}`) and "adapter_loaded" (`{"name", "step"}`). `art serve` turns them into job events.
        """
        engine, trainer = self._require()
        emit: StepEvents = on_event or (lambda kind, data: None)

        def micro_batch_done(done: int, total: int, loss: float) -> None:
            emit("progress", {"micro_batch": done, "total": total, "loss": loss})

        async with self._lock:
            phases: dict[str, float] = {}
            t0 = time.perf_counter()
            await engine.pause()
            phases["pause_s"] = time.perf_counter() - t0
            try:
                # Nothing generates while paused: the KV cache (SmolLM2, 32 rows x 512 positions: 377 MB)
                # need not sit under the training step's peak; the next rollouts allocate it again.
                t = time.perf_counter()
                await self._on_engine_thread(engine.release_idle_cache)
                phases["release_cache_s"] = time.perf_counter() - t
                report = await self._on_engine_thread(
                    trainer.train_step,
                    groups,
                    spec,
                    current_step=self.step,
                    progress=progress,
                    on_micro_batch=micro_batch_done if on_event else None,
                )
                # Give the step's freed memory back to the OS only when the machine is short of it: the next
                # step re-faults every released page (~2 s of a SmolLM2 step; see kernels/allocator.py).
                t = time.perf_counter()
                released = await self._on_engine_thread(release_if_short, self.config.options.release_memory)
                phases["release_memory_s"] = time.perf_counter() - t
                metrics = dict(report.metrics)
                metrics["memory_released"] = float(released)
                if not report.updated:  # nothing trainable, or a skipped (non-finite) update
                    return TrainResult(step=self.step, metrics=metrics, message=report.message)
                new_step = self.step + 1
                t = time.perf_counter()
                await self._on_engine_thread(
                    self._save_checkpoint, new_step, {"trained_on_step": self.step, "spec": spec.model_dump()}
                )
                phases["save_s"] = time.perf_counter() - t
                emit("checkpoint_saved", {"step": new_step})
                t = time.perf_counter()
                await self._on_engine_thread(self._load_into_engine, new_step)
                phases["load_adapter_s"] = time.perf_counter() - t
                emit("adapter_loaded", {"name": self.served_name(new_step), "step": new_step})
                t = time.perf_counter()
                exact, generated = await self._canary(new_step)
                metrics["canary_logprob_diff"] = exact
                metrics["canary_generation_logprob_diff"] = generated
                phases["canary_s"] = time.perf_counter() - t
                self._publish(new_step)
            finally:
                await engine.resume()
            phases["step_s"] = time.perf_counter() - t0
            metrics.update(phases)
            return TrainResult(step=new_step, metrics=metrics, message=report.message)

    async def _canary(self, step: int) -> tuple[float, float]:
        """Mean |logprob difference| on the probe between the trainer and the engine, with the exact LoRA
        arithmetic and as generation computes (adapters folded into the base matmuls); raises beyond the
        tolerance."""
        engine, trainer = self._require()
        probe = engine.chat_template.render_ids(CANARY_PROBE)
        trained = await self._on_engine_thread(trainer.logprobs, probe)
        diffs = []
        for as_generated in (False, True):
            served = await engine.score(self.served_name(step), probe, as_generated=as_generated)
            if len(served) != len(trained):
                raise CanaryError(f"canary: engine scored {len(served)} tokens, trainer {len(trained)}")
            diffs.append(sum(abs(a - b) for a, b in zip(served, trained, strict=True)) / max(len(served), 1))
        diff = max(diffs)
        tolerance = self.config.options.canary_tolerance or canary_tolerance_for(engine.compute_dtype)
        if not math.isfinite(diff) or diff > tolerance:
            engine.unload_adapter(self.served_name(step))
            self._loaded_steps.remove(step)
            raise CanaryError(
                f"canary failed for {self.served_name(step)}: the served adapter's logprobs differ from the "
                f"trainer's by {diff:.4g} on average (tolerance {tolerance:.3g}). The engine is not serving "
                f"what was trained; step {step} was saved to {self.storage.checkpoint_dir(step)} but is not "
                f"served. Restart the service to reload it, and report this as a bug."
            )
        return float(diffs[0]), float(diffs[1])

    async def delete_checkpoints(self, steps_to_keep: Sequence[int]) -> list[int]:
        """Delete checkpoints not in `steps_to_keep` (never the current one); returns the deleted steps."""
        engine, _ = self._require()
        deleted: list[int] = []
        async with self._lock:
            for step in self.storage.checkpoint_steps():
                if step in steps_to_keep or step == self.step:
                    continue
                if step in self._loaded_steps:
                    engine.unload_adapter(self.served_name(step))
                    self._loaded_steps.remove(step)
                self.storage.delete_checkpoint(step)
                deleted.append(step)
        return deleted

    async def close(self) -> None:
        """Stop the engine (and with it the thread the trainer ran on), and drop the model so its memory can be freed."""
        if self.engine is not None:
            await self.engine.close()
            self.engine = None
        self.trainer = None
        import gc

        gc.collect()
        release_freed_memory()
