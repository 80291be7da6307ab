"""One trainable model's heavy side: engine + trainer + the step lifecycle.

A training step, in order (DESIGN.md section 3, step 6):

1. pause inference (new requests wait, none fail);
2. train one step on the LoRA adapter (on the engine's worker thread, the only one that computes; the
   event loop stays free);
3. save `checkpoints/{step:04d}` atomically: written to a temp folder, manifest last, then renamed;
4. load it into the engine as `{name}@{step}`;
5. canary: the engine's logprobs on a fixed probe must match the trainer's within kernel noise (the noise
   floor is measured on the base model when the service starts; `canary.py` says how), otherwise the step
   fails loudly and the new step is not published;
6. publish (`{name}` now aliases `{name}@{step}`) and resume inference.

Which steps stay loaded, the `{name}` alias (set from the start on) and loading an older step again when
a request names it are `adapters.ServedAdapters`'s job; the server sees the engine through
`adapters.OnDemandEngine` (`ModelService.serving_engine`).

A step is all or nothing (`run_step`, which every kind of step goes through): the checkpoint holds the
groups it trained on, so they are on disk before it is committed; if anything fails once the trainer
started changing (training, save, load, canary, publish), the trainer is rolled back to the served
checkpoint (adapter weights and optimizer state), a committed new checkpoint is set aside under
`checkpoints/rejected/`, and a `StepError` says what failed and what was rolled back. The next step can
be taken at once. On start, the newest checkpoint is verified (checksums), loaded and canaried before it is
served; one that fails is set aside, with a warning, and the previous one is served.

`train_sft` (supervised fine-tuning) is a step of the same kind: one call trains every batch it is given,
then saves, loads, checks and publishes one checkpoint, all or nothing. Bad data mid-stream rolls the
trainer back to the published step (the batches before it trained in memory only) and raises the data
error, so what it trains next matches what is served.

The service depends on the `Engine` protocol only (`art.engines.base`); `RuntimeOptions.engine` picks the
engine (`art.engines.factory`). The trainer owns the base model the service loads; the built-in torch engine,
which runs in this process, serves that same object (one copy of the base weights: the trainer wraps it
with PEFT in place). A restarted service resumes from the newest good checkpoint, optimizer state
included, after cleaning leftovers of interrupted saves.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from art.kernels.allocator import release_freed_memory, release_if_short
from art.metrics.gpu import hourly_cost_usd
from art.record.lock import RecordLock
from art.record.storage import ModelStorage, disk_said, storage_error
from art.rollout.training_input import check_token_ids_in_vocab, check_training_groups
from art.service.adapters import OnDemandEngine, ServedAdapters, on_demand
from art.service.canary import (
    CANARY_PROBE,
    CanaryMismatch,
    CanaryReading,
    NoiseFloor,
    check,
    probe_tokens,
)
from art.trajectories import Trajectory, TrajectoryGroup
from art.types import (
    LoRAConfig,
    RejectedCheckpoint,
    RuntimeOptions,
    SFTSpec,
    TrainResult,
    TrainSFTResult,
    TrainSpec,
)

if TYPE_CHECKING:
    from art.engines.base import Engine
    from art.training.distributed.ranks import RankGroup
    from art.training.sft import SFTReport
    from art.training.trainer import StepReport, Trainer

logger = logging.getLogger(__name__)
T = TypeVar("T")

StepEvents = Callable[[str, dict[str, Any]], None]
"""`on_event(kind, data)` of `ModelService.train`: how a step reports its progress as it goes."""


class StepError(RuntimeError):
    """A training step failed and was undone: the trainer is back at the served checkpoint and the service
    can take the next step. The message says what failed and what was rolled back.

    Attributes: `step` (the step that failed), `phase` (what it was doing), `restored_step` (the checkpoint
    the trainer is back at), `rejected_path` (where the failed step's checkpoint was set aside, if saved)
    and `disk_error` (the OSError of a disk that refused a write, when that is what failed).
    """

    def __init__(
        self,
        message: str,
        *,
        step: int | None = None,
        phase: str | None = None,
        restored_step: int | None = None,
        rejected_path: Path | None = None,
        disk_error: OSError | None = None,
    ) -> None:
        super().__init__(message)
        self.step = step
        self.phase = phase
        self.restored_step = restored_step
        self.rejected_path = rejected_path
        self.disk_error = disk_error


class CanaryError(StepError):
    """The served adapter does not compute what the trainer computes: the new step is not published.

    `reading`: what the check measured (`canary.CanaryReading`), where it got that far."""

    reading: CanaryReading | None = None


@dataclass
class ServiceConfig:
    """How to build a model's service: its base model, its adapter, and how it runs."""

    base_model: str
    lora: LoRAConfig
    options: RuntimeOptions = field(default_factory=RuntimeOptions)
    writer: str = "an ART service"  # who holds the record's lock, as a second writer is told (`record_lock`)
    chat_template: str | None = None  # replaces the tokenizer's (serving and training both use it)


class ModelService:
    """The engine, the trainer and the checkpoints of one trainable model."""

    def __init__(self, name: str, storage: ModelStorage, config: ServiceConfig) -> None:
        self.name = name
        self.storage = storage
        self.config = config
        self.step = 0
        self.engine: Engine | None = None
        self.trainer: Trainer | None = None
        self.ranks: RankGroup | None = None  # trainer ranks (`RuntimeOptions.train_ranks` > 1; `scale_out`)
        self._pause_while_training = True  # False where inference and training use separate devices
        self._lock = asyncio.Lock()
        self._on_cpu = True  # the trainer's device is the CPU (set by `start`)
        self.devices: tuple[str, ...] = ()  # the devices the engine and the trainer use (set by `start`)
        self.adapters: ServedAdapters | None = None
        self.serving_engine: OnDemandEngine | None = None  # what the server serves (see `adapters`)
        self._broken: str | None = None  # set when a failed step could not be undone: restart needed
        self._noise: NoiseFloor | None = None  # the canary's noise floor, measured when the service starts
        self._published_probe: list[float] | None = None  # the trainer's probe logprobs at the served step
        self._record_lock = RecordLock(storage.root, owner=config.writer)  # one writer per record

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
        """Take the record's writer lock (`RecordInUseError`, naming the holder, if another service holds
        it), load the model, start the engine, build the trainer, and resume from the newest good
        checkpoint."""
        # One writer per record, decided before anything loads: a second service on this record fails now.
        self._record_lock.acquire()
        try:
            await self._start()
        except BaseException:
            await self.close()
            raise

    async def _start(self) -> None:
        from art.base_model.loader import (
            choose_dtype,
            cuda_device_count,
            load_model_and_tokenizer,
            resolve_device,
        )
        from art.chat.chat_template import ChatTemplate
        from art.cluster import scale_out
        from art.engines.factory import check_dtype, check_engine_available
        from art.kernels.threads import in_fresh_thread
        from art.training.trainer import Trainer

        options = self.config.options
        check_engine_available(options)  # e.g. engine="vllm" without vLLM: fails before anything loads
        device = resolve_device(options.device)
        gpus = cuda_device_count()
        # Where the engine, this trainer and any ranks run; a layout that cannot run fails here, before loading.
        plan = await asyncio.to_thread(scale_out.plan, options, str(device), gpus)
        train_device = plan.trainer_device  # vLLM with 2+ GPUs or dedicated ones: the trainer's own
        self._on_cpu = train_device == "cpu"
        self._pause_while_training = plan.pause_while_training
        self.devices = tuple(sorted({str(device), train_device, *plan.rank_devices}))
        dtype = choose_dtype(options.dtype, device)
        check_dtype(options, str(dtype), str(device))  # e.g. vLLM and bf16 on a V100: before anything loads
        base_model = self.config.base_model
        model, tokenizer = await asyncio.to_thread(  # off the event loop, in a thread that ends with it
            in_fresh_thread, lambda: load_model_and_tokenizer(base_model, dtype=dtype, device=train_device)
        )
        if self.config.chat_template is not None:
            tokenizer.chat_template = self.config.chat_template
        self.engine = await scale_out.start_engine(  # the engine here, or Ray replicas of it
            options,
            base_model=base_model,
            model=model,
            tokenizer=tokenizer,
            device=str(device),
            cuda_devices=gpus,
            max_lora_rank=self.config.lora.r,
            plan=plan,
        )
        self.trainer = await self._on_engine_thread(
            Trainer, model, ChatTemplate(tokenizer), self.config.lora, seed=options.seed, options=options
        )
        self.ranks = await asyncio.to_thread(
            functools.partial(
                scale_out.start_ranks,
                plan,
                base_model=self.config.base_model,
                lora=self.config.lora,
                chat_template=self.config.chat_template,
                options=self.config.options,
                storage=self.storage,
                trainer=self.trainer,
                dtype=str(dtype),
            )
        )
        self.adapters = ServedAdapters(
            self.engine,
            self.name,
            self.storage,
            max_loaded=self.config.options.max_loaded_adapters,
            run_blocking=self.engine.run,
        )
        self.step = await self._resume()  # e.g. no checkpoint passes its checks: `start` closes, then fails
        self.serving_engine = on_demand(self.engine, self.adapters)
        t = time.perf_counter()
        await self.engine.warm_up()
        logger.info("engine warmed up (compiled kernels ready) in %.1f s", time.perf_counter() - t)

    def gpu_names(self) -> list[str]:
        """The names of the GPUs this service uses (engine and trainer), e.g. ["NVIDIA H200"]; [] on a CPU."""
        from art.base_model.loader import cuda_device_name

        return [cuda_device_name(d) for d in self.devices if d.startswith("cuda")]

    def hourly_cost_usd(self, gpu_cost_per_hour_usd: float | None) -> float | None:
        """What the devices this service uses cost per hour (USD), or None when unknown (see
        `art.metrics.gpu.hourly_cost_usd`)."""
        return hourly_cost_usd(self.gpu_names(), gpu_cost_per_hour_usd)

    def served_name(self, step: int) -> str:
        return f"{self.name}@{step}"

    def _require(self) -> tuple[Engine, Trainer]:
        if self.engine is None or self.trainer is None:
            raise RuntimeError(f"the service of {self.name!r} is not started")
        return self.engine, self.trainer

    def _served(self) -> ServedAdapters:
        if self.adapters is None:
            raise RuntimeError(f"the service of {self.name!r} is not started")
        return self.adapters

    def _save_checkpoint(
        self, step: int, manifest: dict[str, Any], groups: Sequence[TrajectoryGroup] = ()
    ) -> None:
        """Save the trainer and the groups it trained on as checkpoint `step`: temp folder, manifest, rename."""
        _, trainer = self._require()
        tmp = self.storage.new_checkpoint_tmp_dir(step)
        try:
            trainer.save(tmp)
            self.storage.write_checkpoint_groups(tmp, groups)
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
        self._served().load(step)

    def _unload_from_engine(self, step: int) -> None:
        self._served().forget(step)

    def _restore_trainer(self, step: int) -> None:
        """Load checkpoint `step` into the trainer (adapter, optimizer, trainer state) after checking its files."""
        _, trainer = self._require()
        self.storage.verify_checkpoint(step)
        trainer.load(self.storage.checkpoint_dir(step))

    def _publish(self, step: int) -> None:
        self._served().publish(step)
        self.step = step

    # ---- the step ----------------------------------------------------------------------------
    async def train(
        self,
        groups: Sequence[TrajectoryGroup],
        spec: TrainSpec,
        *,
        progress: bool = True,
        on_event: StepEvents | None = None,
    ) -> TrainResult:
        """Take one RL step; returns the new step and its metrics. A step with nothing to train (every group's
        rewards equal, say) still advances, serving the unchanged adapter, and its `message` says why.

        All or nothing (see `run_step`): on failure a `StepError` says what failed and what was rolled back.
        `on_event(kind, data)`, if given, hears the step as it goes: "progress" after each micro-batch
        (`{"micro_batch", "total", "loss"}`, called on the engine's thread), "checkpoint_saved"
        (`{"step"}`) and "adapter_loaded" (`{"name", "step"}`). `art serve` turns them into job events.
        """
        _, trainer = self._require()
        self.check_training_input(groups)  # before anything pauses or trains

        def micro_batch_done(done: int, total: int, loss: float) -> None:
            if on_event is not None:
                on_event("progress", {"micro_batch": done, "total": total, "loss": loss})

        def update(current_step: int) -> StepReport:
            report = (self.ranks or trainer).train_step(  # N ranks, or this process's trainer
                groups,
                spec,
                current_step=current_step,
                progress=progress,
                on_micro_batch=micro_batch_done if on_event else None,
            )
            report.metrics["num_gradient_steps"] = float(report.updated)  # one optimizer step, or none
            return report

        return await self.run_step(
            update, groups=groups, manifest={"kind": "rl", "spec": spec.model_dump()}, on_event=on_event
        )

    async def on_trainer(self, fn: Callable[[Trainer], T]) -> T:
        """fn(trainer) on the engine's thread, between steps (under the step lock): the Tinker API's forward
        passes, whose gradients stay in the trainer until a step (`run_step`) applies them. Refused with
        several trainer ranks (their gradients live in other processes)."""
        _, trainer = self._require()
        if self.ranks is not None:
            raise RuntimeError(f"{self.name!r} trains on several ranks; per-call gradients need one trainer")
        async with self._lock:
            if self._broken is not None:
                raise RuntimeError(self._broken)
            result: T = await self._on_engine_thread(fn, trainer)
            return result

    def check_training_input(self, groups: Sequence[TrajectoryGroup]) -> None:
        """Refuse groups the trainer cannot use as they are: a sampled token id that is not an integer of
        this model's vocabulary, a sampled logprob that is not a finite number <= 0 (`TrainingInputError`,
        a ValueError naming the field; see `art.rollout.training_input`)."""
        _, trainer = self._require()
        check_training_groups(groups)
        check_token_ids_in_vocab(groups, trainer.vocab_size)

    async def train_sft(
        self,
        trajectories: Iterable[Trajectory],
        spec: SFTSpec,
        *,
        progress: bool = True,
        verbose: bool = False,
        total_batches: int | None = None,
    ) -> TrainSFTResult:
        """Supervised fine-tuning on `trajectories` (one optimiser step per batch), published as one new
        step like an RL step (all or nothing, see `run_step`); returns it with the call's averaged metrics
        and each batch's. Bad data raises `SFTDataError` (a ValueError) after rolling back."""
        from art.training.sft import SFTDataError, run_sft

        _, trainer = self._require()
        manifest: dict[str, Any] = {"kind": "sft", "spec": spec.model_dump(exclude={"learning_rate"})}
        reports: list[SFTReport] = []

        def update(current_step: int) -> SFTReport:
            report = run_sft(
                trainer, trajectories, spec, progress=progress, verbose=verbose, total_batches=total_batches
            )
            reports.append(report)
            manifest["learning_rates"] = [m["learning_rate"] for m in report.batch_metrics]  # read after
            return report

        try:
            result = await self.run_step(update, groups=(), manifest=manifest)
        except StepError as exc:
            if isinstance(exc.__cause__, SFTDataError):  # the user's data, not the service, failed
                raise SFTDataError(
                    f"{exc.__cause__}. Nothing was published: the trainer is back at checkpoint "
                    f"{exc.restored_step}, which is still served."
                ) from exc.__cause__
            raise
        batch_metrics = reports[0].batch_metrics if reports else []
        return TrainSFTResult(**result.model_dump(), batch_metrics=batch_metrics)

    async def run_step(
        self,
        update: Callable[[int], StepReport | SFTReport],
        *,
        groups: Sequence[TrajectoryGroup],
        manifest: dict[str, Any],
        on_event: StepEvents | None = None,
    ) -> TrainResult:
        """Take one step of any kind, all or nothing.

        `update(current_step)` changes the trainer (it runs on the engine thread, inference paused) and says
        whether it did; then checkpoint `current_step + 1` is saved with `groups` (the data it trained on)
        and `manifest` (plus the step's metrics), loaded into the engine, canaried and published. If anything
        fails from `update` on, `_roll_back` undoes the step and raises `StepError` (`CanaryError` when the
        canary failed). `on_event`: see `train`.
        """
        engine, _ = self._require()
        emit: StepEvents = on_event or (lambda kind, data: None)
        async with self._lock:
            if self._broken is not None:
                raise RuntimeError(self._broken)
            phases: dict[str, float] = {}
            t0 = time.perf_counter()
            if self._pause_while_training:
                await engine.pause()
            phases["pause_s"] = time.perf_counter() - t0
            good, new_step = self.step, self.step + 1
            phase = "training"
            try:
                # Nothing generates while paused: the KV cache (SmolLM2, 32 rows x 512 positions: 377 MB)
                # need not sit under the training step's peak; the next rollouts allocate it again.
                t = time.perf_counter()
                await self._on_engine_thread(engine.release_idle_cache)
                phases["release_cache_s"] = time.perf_counter() - t
                report = await self._on_engine_thread(update, self.step)
                # Give the step's freed memory back to the OS only when the machine is short of it: the next
                # step re-faults every released page (~2 s of a SmolLM2 step; see kernels/allocator.py).
                t = time.perf_counter()
                # (On a GPU the step's tensors live in CUDA's caching allocator, not the host heap: skip it.)
                released = self._on_cpu and await self._on_engine_thread(
                    release_if_short, self.config.options.release_memory
                )
                phases["release_memory_s"] = time.perf_counter() - t
                metrics = dict(report.metrics)
                metrics["memory_released"] = float(released)
                # Nothing trainable (or a skipped non-finite update) still makes a step, as in the reference:
                # the unchanged adapter is saved and served as the next step, and `message` says why.
                phase = "saving its checkpoint"
                t = time.perf_counter()
                await self._on_engine_thread(
                    self._save_checkpoint,
                    new_step,
                    {**manifest, "trained_on_step": self.step, "metrics": metrics},
                    groups,
                )
                phases["save_s"] = time.perf_counter() - t
                emit("checkpoint_saved", {"step": new_step})
                phase = "loading its adapter into the engine"
                t = time.perf_counter()
                await self._on_engine_thread(self._load_into_engine, new_step)
                phases["load_adapter_s"] = time.perf_counter() - t
                emit("adapter_loaded", {"name": self.served_name(new_step), "step": new_step})
                phase = "the canary"
                t = time.perf_counter()
                reading, trained = await self._canary(new_step)
                metrics.update(reading)
                phases["canary_s"] = time.perf_counter() - t
                phase = "publishing"
                self._publish(new_step)
                self._published_probe = trained
            except BaseException as exc:
                await self._roll_back(good, new_step, phase, exc)
            finally:
                if self._pause_while_training:
                    await engine.resume()
            phases["step_s"] = time.perf_counter() - t0
            metrics.update(phases)
            return TrainResult(
                step=new_step,
                metrics=metrics,
                message=report.message,
                trainer_record=getattr(report, "record", None),
            )

    # ---- all or nothing: roll back a failed step, resume from the newest good checkpoint -----------
    async def _roll_back(self, good: int, failed_step: int, phase: str, exc: BaseException) -> NoReturn:
        """Undo step `failed_step` (it failed while `phase`): unload its adapter, set its checkpoint aside if it
        was committed, and load checkpoint `good` (the one served) back into the trainer. Then raise the error
        that says so (the original exception as is, for a cancellation or an interrupt)."""
        disk = storage_error(exc)
        if isinstance(exc, CanaryError):
            failure = str(exc)
        elif disk is not None:  # what the disk said, as it said it: not a bug of ours
            failure = f"the disk refused a write: {disk_said(disk)}"
        else:
            failure = f"{type(exc).__name__}: {exc}"
        rejected: Path | None = None
        try:
            self._unload_from_engine(failed_step)
            if failed_step in self.storage.checkpoint_steps():
                rejected = self.storage.reject_checkpoint(
                    failed_step, f"step failed while {phase}: {failure}"
                )
                self._prune_rejected()
            await self._on_engine_thread(self._restore_trainer, good)
        except Exception as again:
            self._broken = (
                f"the service of {self.name!r} could not undo failed step {failed_step} ({again}); restart it "
                f"(it resumes from checkpoint {good}, which it still serves)"
            )
            raise StepError(
                f"step {failed_step} of {self.name!r} failed while {phase} ({failure}), and rolling back to "
                f"checkpoint {good} failed too ({type(again).__name__}: {again}). Inference still serves "
                f"{self.served_name(good)}; restart the service to train again (it resumes from checkpoint "
                f"{good}).",
                step=failed_step,
                phase=phase,
                rejected_path=rejected,
                disk_error=disk,
            ) from exc
        if not isinstance(exc, Exception):  # cancelled or interrupted: undone, and passed on as it is
            raise exc
        aside = (
            f"checkpoint {failed_step} was set aside in {rejected} for debugging"
            if rejected is not None
            else f"nothing of step {failed_step} was saved"
        )
        headline = (
            failure if isinstance(exc, CanaryError) else f"step {failed_step} failed while {phase}: {failure}"
        )
        error_type = CanaryError if isinstance(exc, CanaryError) else StepError
        raise error_type(
            f"{headline}. Rolled back: the trainer is back at checkpoint {good} (adapter weights and optimizer "
            f"state), {self.served_name(good)} is still served, and {aside}. The next step will be step "
            f"{failed_step} again.",
            step=failed_step,
            phase=phase,
            restored_step=good,
            rejected_path=rejected,
            disk_error=disk,
        ) from exc

    async def _resume(self) -> int:
        """Serve the newest checkpoint that passes its checks (files match their checksums, it loads, the canary
        agrees) and return its step; newer ones that fail are set aside with a warning.

        Checkpoint 0 (the untrained adapter) is written first when there is none. If no checkpoint passes,
        or only the untrained one does while a trained one failed the canary (then the engine, not the
        checkpoints, is the likely culprit), nothing is set aside and RuntimeError says why.
        """
        adopted_before = set(self.storage.adopted_checkpoints())
        removed = self.storage.clean_incomplete_checkpoints()
        if removed:
            logger.warning(
                "tidied %d incomplete checkpoint folder(s) left by an interrupted save or copy (temporary ones "
                "deleted, others set aside under %s): %s",
                len(removed),
                self.storage.rejected_dir,
                ", ".join(p.name for p in removed),
            )
        adopted = sorted(set(self.storage.adopted_checkpoints()) - adopted_before)
        if adopted:
            logger.warning(
                "adopted checkpoint(s) %s: PEFT adapters without ART's manifest (e.g. saved by the reference "
                "ART); they are checked and resumed from like any checkpoint, with a fresh optimizer",
                ", ".join(map(str, adopted)),
            )
        steps = self.storage.checkpoint_steps()
        if not steps:
            await self._on_engine_thread(self._save_checkpoint, 0, {"note": "untrained adapter"})
            steps = [0]
        self._served().scan_disk()
        await self._measure_noise_floor()
        failures: list[tuple[int, Exception]] = []
        served: int | None = None
        for step in reversed(steps):
            try:
                await self._on_engine_thread(self._restore_trainer, step)
                await self._on_engine_thread(self._load_into_engine, step)
                _, self._published_probe = await self._canary(step, stale_check=False)
            except Exception as exc:
                self._unload_from_engine(step)
                failures.append((step, exc))
                continue
            served = step
            break
        canary_failed = any(isinstance(exc, CanaryError) for _, exc in failures)
        if served is None or (served == 0 and canary_failed):
            reasons = "; ".join(f"checkpoint {s}: {type(e).__name__}: {e}" for s, e in failures)
            raise RuntimeError(
                f"no checkpoint of {self.name!r} can be served as trained: {reasons}. Nothing was set aside. "
                "If the canary failed for every trained checkpoint, the engine (or the base model, or its "
                "dtype) changed since they were saved; a corrupted checkpoint can be moved out of "
                f"{self.storage.checkpoints_dir} by hand."
            )
        for step, error in failures:
            where = self.storage.reject_checkpoint(
                step, f"failed its check at start: {type(error).__name__}: {error}"
            )
            logger.warning(
                "checkpoint %d of %r failed its check at start (%s: %s); set aside in %s. Serving step %d "
                "instead.",
                step,
                self.name,
                type(error).__name__,
                error,
                where,
                served,
            )
        self._prune_rejected()
        self._publish(served)
        return served

    def _prune_rejected(self) -> None:
        """Keep at most `max_rejected_checkpoints` set-aside checkpoints (the newest); log what goes."""
        keep = self.config.options.max_rejected_checkpoints
        try:
            deleted = self.storage.delete_rejected_checkpoints(keep=keep)
        except OSError as e:
            logger.warning("could not delete old set-aside checkpoints of %r: %s", self.name, e)
            return
        if deleted:
            logger.info(
                "deleted %d set-aside checkpoint(s) of %r beyond max_rejected_checkpoints=%d: %s",
                len(deleted),
                self.name,
                keep,
                ", ".join(deleted),
            )

    def rejected_checkpoints(self) -> list[RejectedCheckpoint]:
        """The checkpoints set aside under `checkpoints/rejected/`, oldest first, with why."""
        return [
            RejectedCheckpoint.model_validate(self.storage.rejected_checkpoint_info(folder))
            for folder in self.storage.rejected_checkpoints()
        ]

    async def purge_rejected_checkpoints(self) -> list[str]:
        """Delete every set-aside checkpoint; returns their names."""
        async with self._lock:  # not while a step may be setting one aside
            return self.storage.delete_rejected_checkpoints(keep=0)

    def _probe_ids(self) -> list[int]:
        """The canary's probe as token ids: as much as its compute dtype needs (`canary.probe_tokens`), cut to
        fit the engine's context (one position left for the token a server generates after a scored prompt)."""
        engine, _ = self._require()
        ids = list(engine.chat_template.render_ids(CANARY_PROBE))
        length = max(2, int(engine.max_model_len) - 1)
        return ids[: min(length, probe_tokens(engine.compute_dtype) or length)]

    async def _measure_noise_floor(self) -> None:
        """Score the canary's probe on the base model (adapter off) with the engine and the trainer: how far two
        correct implementations differ here (kernel noise), what every later check is measured against. A
        RuntimeError at start if they are not the same model at all."""
        engine, trainer = self._require()
        probe = self._probe_ids()
        trainer_base = await self._on_engine_thread(trainer.logprobs, probe, adapter=False)
        engine_base = await engine.score(engine.base_model_name, probe)
        try:
            self._noise = NoiseFloor.measure(engine_base, trainer_base)
        except CanaryMismatch as exc:
            raise RuntimeError(
                f"the {self._engine_label()} engine and the trainer disagree about {self.config.base_model!r}: "
                f"{exc}. Nothing was trained or set aside."
            ) from None
        logger.info(
            "canary noise floor (%s engine, base model): %.3g nats per token",
            self._engine_label(),
            self._noise.mean_abs,
        )

    def _engine_label(self) -> str:
        engine, _ = self._require()
        return f"{self.config.options.engine}, {engine.compute_dtype.removeprefix('torch.')}"

    async def _canary(self, step: int, *, stale_check: bool = True) -> tuple[dict[str, float], list[float]]:
        """Check that the engine serves step `step` as the trainer computes it (`canary.check`, exact LoRA
        arithmetic and as generation computes it, e.g. adapters folded into the base matmuls); raise
        CanaryError naming the engine, the dtype, what was measured and the noise floor.

        `stale_check`: also check the step's change against the published step's (off at start, where the
        step is the published one). Returns the step's `canary_*` metrics and the trainer's probe logprobs."""
        engine, trainer = self._require()
        if self._noise is None:
            await self._measure_noise_floor()
        assert self._noise is not None
        probe = self._probe_ids()
        trained = await self._on_engine_thread(trainer.logprobs, probe)
        served = [
            await engine.score(self.served_name(step), probe, as_generated=as_generated)
            for as_generated in (False, True)
        ]
        try:
            reading: CanaryReading = check(
                trained,
                served,
                self._noise,
                compute_dtype=engine.compute_dtype,
                previous=self._published_probe if stale_check else None,
                raw_tolerance=self.config.options.canary_tolerance,
            )
        except CanaryMismatch as exc:
            error = CanaryError(
                f"canary failed for {self.served_name(step)} ({self._engine_label()}): {exc}; noise floor "
                f"{self._noise.mean_abs:.3g} nats per token (engine vs trainer on the base model, measured "
                "at start). The engine is not serving what was trained (a bug worth reporting, unless the "
                "checkpoint was damaged)",
                step=step,
                phase="the canary",
            )
            error.reading = exc.reading
            raise error from None
        metrics = reading.metrics()
        metrics["canary_logprob_diff"] = _mean_abs_diff(served[0], trained)
        metrics["canary_generation_logprob_diff"] = _mean_abs_diff(served[1], trained)
        return metrics, trained

    async def delete_checkpoints(self, steps_to_keep: Sequence[int]) -> list[int]:
        """Delete checkpoints not in `steps_to_keep` (never the current one); returns the deleted steps."""
        adapters = self._served()
        deleted: list[int] = []
        async with self._lock:
            for step in self.storage.checkpoint_steps():
                if step in steps_to_keep or step == self.step:
                    continue
                adapters.forget(step)
                self.storage.delete_checkpoint(step)
                deleted.append(step)
        return deleted

    def unload_adapters_except(self, steps_to_keep: set[int]) -> list[int]:
        """Unload loaded steps not in `steps_to_keep` (never the published one); they stay on disk and load
        again on demand. Returns the unloaded steps."""
        return self._served().unload_except(steps_to_keep)

    async def close(self) -> None:
        """Stop the engine (and with it the thread the trainer ran on), and drop the model so its memory can be freed."""
        if self.ranks is not None:
            await asyncio.to_thread(self.ranks.close)
            self.ranks = None
        if self.engine is not None:
            await self.engine.close()
            self.engine = None
        self.trainer = None
        self.adapters = self.serving_engine = None
        self._record_lock.release()
        import gc

        gc.collect()
        if self._on_cpu:
            release_freed_memory()


def _mean_abs_diff(a: Sequence[float], b: Sequence[float]) -> float:
    return sum(abs(x - y) for x, y in zip(a, b, strict=True)) / max(len(a), 1)
