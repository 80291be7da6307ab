"""`PipelineTrainer`: rollouts, training and evaluation as three concurrent stages (the reference's class).

Rollout workers take scenarios from an iterator and produce groups on the newest policy; the training
stage takes a batch of groups as soon as `min_batch_size` are ready (up to `max_batch_size`), trains one
step and logs it; evaluations run on the steps they were scheduled for. Rollouts may start on a policy at
most `max_steps_off_policy` steps older than the step being trained (workers wait otherwise), and a group
that became older than that before it was trained is discarded as stale. Every request of one rollout
names the step it started on (`pin_inference_step`), and that checkpoint is kept until the rollout ends.

Where the stages really overlap depends on the engine: with vLLM on its own GPUs, serving goes on while
the trainer trains; the built-in CPU engine answers requests between training steps (on 2 cores, the two
would only slow each other), so there the pipeline's gain is that rollouts never wait for a whole batch
to finish before the next step starts.

Resumable: where the scenario iterator stood, and which steps were evaluated, are kept in the model's
`state.json` (`model.read_state()["_pipeline_trainer"]`); a restarted `train()` skips the scenarios used.

    trainer = PipelineTrainer(model, backend, make_group_rollout_fn(rollout, n=8), scenarios, config,
                              eval_fn=evaluate, min_batch_size=4, max_steps=50)
    await trainer.train()
"""

from __future__ import annotations

import asyncio
import math
import signal
import statistics
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterable
from contextlib import AbstractContextManager, AsyncExitStack, asynccontextmanager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from art.recipes.pipeline_trainer.checkpoint_retention import (
    CHECKPOINT_CREATED_AT_METRIC,
    CHECKPOINT_EVAL_COMPLETED_METRIC,
    CHECKPOINT_SAVED_METRIC,
    CheckpointInfo,
    CheckpointRetentionContext,
    CheckpointRetentionStrategy,
)
from art.recipes.pipeline_trainer.state import PipelineState
from art.recipes.pipeline_trainer.status import StatusReporter
from art.recipes.pipeline_trainer.types import ConfigT, EvalFn, RolloutFn, ScenarioT, SingleRolloutFn
from art.rollout.leases import pin_inference_step
from art.trajectories import Trajectory, TrajectoryGroup
from art.types import DEFAULT_LOSS_FN, LOSS_FN_CHOICES, LOSS_FNS, PIPELINE_LEARNING_RATE

if TYPE_CHECKING:
    from art.model import Backend, TrainableModel
    from art.types import TrainResult

PIPELINE_STATE_KEY = "_pipeline_trainer"
T = TypeVar("T")


@dataclass
class _Finished:
    """A finished group on its way to training, with how long its rollout ran and its worker waited."""

    group: TrajectoryGroup
    rollout_seconds: float
    idle_seconds: float


class AllRolloutsFailedError(RuntimeError):
    """Every rollout of a group raised: the rollout function is broken, so the pipeline stops."""


def _aiter(items: Iterable[T] | AsyncIterator[T]) -> AsyncIterator[T]:
    if isinstance(items, AsyncIterator):
        return items

    async def gen() -> AsyncIterator[T]:
        for item in items:
            yield item

    return gen()


def make_group_rollout_fn(
    single_rollout_fn: SingleRolloutFn[ScenarioT, ConfigT], n: int = 4
) -> RolloutFn[ScenarioT, ConfigT]:
    """A group rollout that runs `single_rollout_fn` `n` times concurrently; a rollout that raises is kept as
    the group's exception (the others still train).

    Example:
        rollout_fn = make_group_rollout_fn(play_one_game, n=8)
    """
    if n < 0:
        raise ValueError(f"make_group_rollout_fn: n must be >= 0, got {n}")

    async def group_rollout(model: TrainableModel, scenario: ScenarioT, config: ConfigT) -> TrajectoryGroup:
        results = await asyncio.gather(
            *(single_rollout_fn(model, scenario, config) for _ in range(n)), return_exceptions=True
        )
        for result in results:  # cancellation and KeyboardInterrupt are not a rollout's failure
            if isinstance(result, BaseException) and not isinstance(result, Exception):
                raise result
        return TrajectoryGroup(results)

    return group_rollout


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    """The exceptions inside (nested) task-group errors, without the cancellations they caused."""
    found: list[BaseException] = []
    for e in group.exceptions:
        if isinstance(e, BaseExceptionGroup):
            found.extend(_leaves(e))
        elif not isinstance(e, asyncio.CancelledError):
            found.append(e)
    return found


def _zero_variance(group: TrajectoryGroup) -> bool:
    rewards = [t.reward for t in group.trajectories]
    return len(rewards) <= 1 or max(rewards) - min(rewards) <= 1e-12


def _initial_version(group: TrajectoryGroup) -> int | None:
    versions = [t.initial_policy_version for t in group.trajectories if t.initial_policy_version is not None]
    return min(versions) if versions else None


class PipelineTrainer(Generic[ScenarioT, ConfigT]):
    """Asynchronous RL: rollouts, training and evaluation run concurrently (see the module docstring).

    Args:
        model, backend: a registered `TrainableModel` and its backend.
        rollout_fn: `await rollout_fn(model, scenario, config) -> TrajectoryGroup`
            (`make_group_rollout_fn` makes one from a single-trajectory rollout).
        scenarios: an iterable or async iterator of scenario dicts; training ends when it is exhausted.
            A scenario's `"metadata"` dict (scalars) is copied to its group's metadata.
        config: passed to `rollout_fn` and `eval_fn` as is.
        eval_fn: `await eval_fn(model, step, config)` -> trajectories/groups (logged as "val") or a dict of
            split name -> trajectories/groups. Runs at the start (`eval_at_start`) and every
            `eval_every_n_steps` steps (0: never), on that step's checkpoint.
        num_rollout_workers: scenarios rolled out at once.
        min_batch_size, max_batch_size: groups per training step (`max_batch_size` default 10x min).
        max_steps_off_policy: how many steps older than the step being trained a rollout's policy may be.
        queue_maxsize: finished groups waiting for training (default max_steps_off_policy x max_batch_size).
        learning_rate, loss_fn, loss_fn_config, normalize_advantages, adam_params, kl_penalty_coef,
            kl_penalty_step_lag, packed_sequence_length, megatron_topology: passed to `backend.train`
            (see `art.backends.train_options` for what each does here).
        max_steps: stop after this many steps (None: when the scenarios run out).
        discard_queue_multiplier: stop (model collapse) once this x `min_batch_size` groups had equal
            rewards since the last step; such groups never train.
        log_interval_seconds, status_ewa_alpha, total_scenarios: the status line (`StatusReporter`).
        eval_at_start, save_checkpoint: see above; every step is saved here (`save_checkpoint=False`
            is refused, because the served adapter is the saved checkpoint).
        checkpoint_retention_strategy, checkpoint_retention_interval: which checkpoints to delete, checked
            every `interval` steps (e.g. `keep_recent_and_top()`); None keeps all.
        resume: continue from the position saved in the model's state.
        show_progress: a tqdm bar over scenarios (ours; the status lines are printed either way).
    """

    def __init__(
        self,
        model: TrainableModel,
        backend: Backend,
        rollout_fn: RolloutFn[ScenarioT, ConfigT],
        scenarios: AsyncIterator[ScenarioT] | Iterable[ScenarioT],
        config: ConfigT,
        eval_fn: EvalFn[ConfigT] | None = None,
        *,
        num_rollout_workers: int = 16,
        min_batch_size: int = 4,
        max_batch_size: int | None = None,
        max_steps_off_policy: int = 4,
        queue_maxsize: int | None = None,
        learning_rate: float = PIPELINE_LEARNING_RATE,
        loss_fn: str = DEFAULT_LOSS_FN,
        loss_fn_config: dict[str, Any] | None = None,
        normalize_advantages: bool = True,
        adam_params: object | None = None,
        packed_sequence_length: int | None = None,
        kl_penalty_coef: float = 0.0,
        kl_penalty_step_lag: int | None = None,
        megatron_topology: object | None = None,
        max_steps: int | None = None,
        discard_queue_multiplier: int = 100,
        log_interval_seconds: float = 60.0,
        status_ewa_alpha: float = 0.2,
        total_scenarios: int | None = None,
        eval_every_n_steps: int = 20,
        eval_at_start: bool = True,
        save_checkpoint: bool = True,
        checkpoint_retention_strategy: CheckpointRetentionStrategy | None = None,
        checkpoint_retention_interval: int = 1,
        resume: bool = True,
        show_progress: bool = True,
    ) -> None:
        """Check every setting (see the class docstring) and keep it; start nothing.

        Long on purpose: the reference's constructor, argument for argument; its body is that list of
        settings checked (one table of conditions and messages) and stored, nothing to split off."""
        checks: list[tuple[bool, str]] = [
            (num_rollout_workers > 0, f"num_rollout_workers must be > 0, got {num_rollout_workers}"),
            (min_batch_size > 0, f"min_batch_size must be > 0, got {min_batch_size}"),
            (
                max_batch_size is None or max_batch_size >= min_batch_size,
                f"max_batch_size must be >= min_batch_size ({min_batch_size}), got {max_batch_size}",
            ),
            (max_steps_off_policy >= 0, f"max_steps_off_policy must be >= 0, got {max_steps_off_policy}"),
            (queue_maxsize is None or queue_maxsize > 0, f"queue_maxsize must be > 0, got {queue_maxsize}"),
            (
                eval_every_n_steps >= 0,
                f"eval_every_n_steps must be >= 0 (0: never), got {eval_every_n_steps}",
            ),
            (max_steps is None or max_steps >= 0, f"max_steps must be >= 0, got {max_steps}"),
            (log_interval_seconds > 0, f"log_interval_seconds must be > 0, got {log_interval_seconds}"),
            (
                discard_queue_multiplier > 0,
                f"discard_queue_multiplier must be > 0, got {discard_queue_multiplier}",
            ),
            (
                checkpoint_retention_interval > 0,
                f"checkpoint_retention_interval must be > 0, got {checkpoint_retention_interval}",
            ),
            (
                kl_penalty_step_lag is None or kl_penalty_step_lag >= 1,
                f"kl_penalty_step_lag must be >= 1, got {kl_penalty_step_lag}",
            ),
            (
                save_checkpoint,
                "save_checkpoint=False is not supported here: every step is saved, because the served "
                "adapter is the saved checkpoint; use checkpoint_retention_strategy to delete old ones",
            ),
            (
                loss_fn_config is None,
                "loss_fn_config must be None (as with the reference's LocalBackend): choose the loss with "
                f"loss_fn ({LOSS_FN_CHOICES})",
            ),
            (adam_params is None, "adam_params must be None (as with the reference's LocalBackend)"),
            (loss_fn in LOSS_FNS, f"loss_fn must be {LOSS_FN_CHOICES}, got {loss_fn!r}"),
        ]
        for ok, problem in checks:
            if not ok:
                raise ValueError(f"PipelineTrainer: {problem}")
        if not model.trainable:
            raise ValueError(f"PipelineTrainer: model {model.name!r} is not a TrainableModel")
        self.model = model
        self.backend = backend
        self.rollout_fn = rollout_fn
        self.config = config
        self.eval_fn = eval_fn
        self.num_rollout_workers = num_rollout_workers
        self.min_batch_size = min_batch_size
        self.max_batch_size = max_batch_size if max_batch_size is not None else 10 * min_batch_size
        self.max_steps_off_policy = max_steps_off_policy
        self.queue_maxsize = queue_maxsize
        self.learning_rate = learning_rate
        self.loss_fn = loss_fn
        self.normalize_advantages = normalize_advantages
        self.packed_sequence_length = packed_sequence_length
        self.kl_penalty_coef = kl_penalty_coef
        self.kl_penalty_step_lag = kl_penalty_step_lag
        self.megatron_topology = megatron_topology
        self.max_steps = max_steps
        self.discard_queue_multiplier = discard_queue_multiplier
        self.eval_every_n_steps = eval_every_n_steps
        self.eval_at_start = eval_at_start
        self.save_checkpoint = save_checkpoint
        self.checkpoint_retention_strategy = checkpoint_retention_strategy
        self.checkpoint_retention_interval = checkpoint_retention_interval
        self.resume = resume
        self.state = PipelineState()
        self.collapsed = False  # True when training stopped because groups kept having equal rewards
        self._discarded: list[TrajectoryGroup] = []
        self._discard_limit = discard_queue_multiplier * min_batch_size
        self._leases: Counter[int] = Counter()  # steps a rollout or evaluation still uses
        self._eval_stacks: dict[int, AsyncExitStack] = {}
        self._scenarios: AsyncIterator[ScenarioT] = _aiter(scenarios)
        self._scenario_lock = asyncio.Lock()
        self._queue: asyncio.Queue[_Finished | TrajectoryGroup | None] | None = None
        self._timings: dict[int, _Finished] = {}  # id(group) -> its rollout's timing, while it waits
        self._eval_queue: asyncio.Queue[int | None] | None = None
        self._stop_requested = False
        self._background: set[asyncio.Task[None]] = set()  # tasks request_stop() started
        self._status = StatusReporter(
            get_scenario_offset=lambda: self.state.scenario_offset,
            log_interval_seconds=log_interval_seconds,
            status_ewa_alpha=status_ewa_alpha,
            total_scenarios=total_scenarios,
            num_workers=num_rollout_workers,
            show_progress=show_progress,
        )

    @property
    def _output_queue(self) -> asyncio.Queue[_Finished | TrajectoryGroup | None] | None:
        """The queue from the rollout workers to the trainer (the reference's name; `train()` makes it)."""
        return self._queue

    @_output_queue.setter
    def _output_queue(self, queue: asyncio.Queue[_Finished | TrajectoryGroup | None] | None) -> None:
        self._queue = queue

    # ---- the run ------------------------------------------------------------------------------
    async def train(self, *, handle_signals: bool = True) -> None:
        """Run the pipeline until the scenarios run out, `max_steps` steps are trained, `request_stop()`
        is called (SIGINT/SIGTERM call it when `handle_signals`), or the model collapses. A failing stage
        (e.g. every rollout of a group raised) stops the others and its exception is raised."""
        start_step = await self.model.get_step()
        saved: dict[str, Any] = (
            (self.model.read_state() or {}).get(PIPELINE_STATE_KEY, {}) if self.resume else {}
        )
        if saved.get("training_step") not in (None, start_step):
            self._status.write(
                f"note: the pipeline's saved position is for step {saved['training_step']}, the backend is at "
                f"step {start_step}; continuing from step {start_step}"
            )
        self.state = PipelineState(
            policy_version=start_step,
            next_training_step=start_step,
            last_eval_step=int(saved.get("last_eval_step", 0)),
            completed_eval_steps={int(s) for s in saved.get("completed_eval_steps", [])},
        )
        offset = int(saved.get("scenario_offset", 0))
        if offset:
            skipped = 0
            async for _ in self._scenarios:
                skipped += 1
                if skipped == offset:
                    break
            if skipped < offset:
                self._status.write(f"note: the scenarios ran out while skipping the {offset} already used")
            self.state.scenario_offset = skipped
        self.state.total_scenarios_consumed = int(
            saved.get("total_scenarios_consumed", self.state.scenario_offset)
        )
        self._queue = asyncio.Queue(
            maxsize=self.queue_maxsize or max(1, self.max_steps_off_policy * self.max_batch_size)
        )
        self._eval_queue = asyncio.Queue()
        self._stop_requested = False
        if (
            self.eval_fn is not None
            and self.eval_at_start
            and start_step not in self.state.completed_eval_steps
        ):
            await self._schedule_eval(start_step)
        self._persist(start_step)
        self._status.start(initial_step=start_step)
        restore = self._install_signal_handlers() if handle_signals else (lambda: None)
        try:
            async with asyncio.TaskGroup() as tg:
                rollouts = tg.create_task(self._rollout_stage(), name="rollout_stage")
                tg.create_task(self._eval_stage(), name="eval_stage")
                status = tg.create_task(self._status_loop(), name="status_loop")
                await self._training_stage()
                self._persist(self.state.policy_version)
                await self._finish()
                rollouts.cancel()  # rollouts in flight would never be trained
                status.cancel()
        except BaseExceptionGroup as group:
            errors = _leaves(group)
            if len(errors) == 1:  # one stage failed (the usual case): its own exception, not a group
                raise errors[0] from None
            raise
        finally:
            restore()
            self._status.flush()
            self._status.close()
            for stack in list(self._eval_stacks.values()):
                await stack.aclose()
            self._eval_stacks.clear()

    def request_stop(self) -> None:
        """Stop cleanly: no new rollouts or steps; a step in progress finishes and is logged, scheduled
        evaluations run, and the position is saved so the next `train()` resumes after it (scenarios whose
        groups were still in flight or queued count as used, as in the reference)."""
        if self.state.done or self._stop_requested:
            return
        self._stop_requested = True
        self.state.done = True
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._background.add(loop.create_task(self._notify_policy()))
        if self._queue is not None:
            try:
                self._queue.put_nowait(None)
            except asyncio.QueueFull:
                self._background.add(loop.create_task(self._queue.put(None)))
        for task in self._background:
            task.add_done_callback(self._background.discard)

    def _install_signal_handlers(self) -> Any:
        loop = asyncio.get_running_loop()
        installed: list[tuple[signal.Signals, Any]] = []

        def on_signal(sig: signal.Signals) -> None:
            if not self._stop_requested:
                self._status.write(f"{sig.name} received: finishing the current step, then stopping")
            self.request_stop()

        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                previous = signal.getsignal(sig)
                loop.add_signal_handler(sig, on_signal, sig)
                installed.append((sig, previous))
            except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or Windows
                pass

        def restore() -> None:
            for sig, previous in installed:
                loop.remove_signal_handler(sig)
                if previous is not None:
                    signal.signal(sig, previous)  # e.g. asyncio.run's own Ctrl-C handler

        return restore

    async def _notify_policy(self) -> None:
        async with self.state.policy_updated:
            self.state.policy_updated.notify_all()

    async def _finish(self) -> None:
        self.state.done = True
        await self._notify_policy()
        assert self._eval_queue is not None
        await self._eval_queue.put(None)  # the evaluation stage ends after the ones scheduled

    # ---- rollouts -----------------------------------------------------------------------------
    async def _next_scenario(self) -> ScenarioT | None:
        async with self._scenario_lock:
            if self.state.done:
                return None
            try:
                scenario = await anext(self._scenarios)
            except StopAsyncIteration:
                return None
            self.state.scenario_offset += 1
            self.state.total_scenarios_consumed += 1
            return scenario

    async def _wait_for_policy(self) -> None:
        async with self.state.policy_updated:
            await self.state.policy_updated.wait_for(
                lambda: (
                    self.state.done
                    or self.state.policy_version >= self.state.next_training_step - self.max_steps_off_policy
                )
            )

    @asynccontextmanager
    async def _lease(self, step: int, *, pin: bool) -> AsyncIterator[None]:
        """Keep checkpoint `step` while the block runs; `pin`: requests in it name that step."""
        self._leases[step] += 1
        try:
            async with AsyncExitStack() as stack:
                backend_lease = getattr(
                    self.backend, "adapter_lease" if pin else "adapter_retention_lease", None
                )
                if backend_lease is not None:
                    await stack.enter_async_context(backend_lease(self.model, step))
                if pin:
                    await stack.enter_async_context(pin_inference_step(self.model.name, step))
                yield
        finally:
            self._leases[step] -= 1
            if self._leases[step] <= 0:
                del self._leases[step]

    def _metrics_context(self, cost_context: str) -> AbstractContextManager[object]:
        """The model's metrics context `cost_context` ("train" for rollouts, "eval" for evaluations): costs
        that `track_api_cost` functions (or the model's cost calculator) record inside land in that split's
        next row. A stand-in model without `metrics_builder` gets no context."""
        builder = getattr(self.model, "metrics_builder", None)
        return builder(cost_context).activate_context() if callable(builder) else nullcontext()

    async def _rollout_worker(self, worker_id: int) -> None:
        assert self._queue is not None
        while not self.state.done:
            scenario = await self._next_scenario()
            if scenario is None:
                return
            self._status.note_rollout_started()
            errored = True
            try:
                waited = time.monotonic()
                await self._wait_for_policy()
                idle = time.monotonic() - waited
                if self.state.done:
                    return
                version = self.state.policy_version
                started = time.monotonic()
                with self._metrics_context("train"):
                    async with self._lease(version, pin=True):
                        group = await self.rollout_fn(self.model, scenario, self.config)
                wall = time.monotonic() - started
                if not isinstance(group, TrajectoryGroup):
                    raise TypeError(
                        f"rollout_fn must return an art.TrajectoryGroup, got {type(group).__name__} "
                        "(wrap a single-trajectory rollout with make_group_rollout_fn)"
                    )
                self._tag(group, scenario, version)
                if not group.trajectories and group.exceptions:
                    first = group.exceptions[0]
                    raise AllRolloutsFailedError(
                        f"all {len(group.exceptions)} rollouts of a group failed{self._where(scenario)}; the first: "
                        f"{first.type}: {first.message}"
                    )
                await self._put(_Finished(group, wall, idle))
                errored = False
            except (asyncio.CancelledError, AllRolloutsFailedError):
                raise
            except Exception as e:
                self._status.write(
                    f"worker {worker_id}: rollout failed{self._where(scenario)}: {type(e).__name__}: {e}"
                )
            finally:
                self._status.note_rollout_finished(errored=errored)

    async def _rollout_stage(self) -> None:
        async with asyncio.TaskGroup() as tg:
            for worker in range(self.num_rollout_workers):
                tg.create_task(self._rollout_worker(worker), name=f"rollout_worker_{worker}")
        assert self._queue is not None
        await self._queue.put(None)  # no more scenarios: train what is queued, then stop

    async def _put(self, finished: _Finished) -> None:
        """Queue a finished group, waiting while the queue is full (counted as the worker's idle time)."""
        assert self._queue is not None
        started = time.monotonic()
        while not self.state.done:
            try:
                async with asyncio.timeout(
                    1.0
                ):  # in this task: nothing runs between the put and what follows
                    await self._queue.put(finished)
            except TimeoutError:
                continue
            finished.idle_seconds += time.monotonic() - started
            self._status.note_group_enqueued(finished.group)
            await asyncio.sleep(0)  # let the trainer take it (and claim its step) before the next rollout
            return

    def _tag(self, group: TrajectoryGroup, scenario: ScenarioT, version: int) -> None:
        for trajectory in group.trajectories:
            if trajectory.initial_policy_version is None:
                trajectory.initial_policy_version = version
            if trajectory.final_policy_version is None:
                trajectory.final_policy_version = self.state.policy_version
        metadata = scenario.get("metadata") if isinstance(scenario, dict) else None
        for key, value in (metadata or {}).items() if isinstance(metadata, dict) else ():
            if isinstance(key, str) and (value is None or isinstance(value, str | int | float | bool)):
                group.metadata[key if key == "scenario_id" else f"scenario_{key}"] = value

    @staticmethod
    def _where(scenario: object) -> str:
        metadata = scenario.get("metadata") if isinstance(scenario, dict) else None
        if not isinstance(metadata, dict):
            return ""
        fields = [f"{k}={metadata[k]!r}" for k in ("scenario_id", "epoch", "scenario_index") if k in metadata]
        return f" [{' '.join(fields)}]" if fields else ""

    # ---- training -----------------------------------------------------------------------------
    async def _collect_batch(self, current_step: int) -> tuple[list[TrajectoryGroup], int, bool]:
        """Groups to train on at `current_step`: wait for `min_batch_size`, then take what else is ready up
        to `max_batch_size`. Returns (batch, stale groups discarded, whether the rollouts have ended); each
        group's rollout timing waits in `_timings` for the step's metrics. (The queue carries `_Finished`
        groups from our workers; plain groups, as the reference's queue holds, are taken too.)"""
        assert self._queue is not None
        batch: list[TrajectoryGroup] = []
        stale = 0
        oldest = current_step - self.max_steps_off_policy
        while len(batch) < self.max_batch_size:
            if len(batch) < self.min_batch_size:
                item = await self._queue.get()
            else:
                try:
                    item = self._queue.get_nowait()
                except asyncio.QueueEmpty:
                    break
            if item is None:
                return batch, stale, True
            if isinstance(item, TrajectoryGroup):
                item = _Finished(item, 0.0, 0.0)
            self._status.note_group_dequeued(item.group)
            version = _initial_version(item.group)
            if version is not None and version < oldest:
                stale += 1
            elif _zero_variance(item.group):
                self._discarded.append(item.group)
                self._status.note_zero_variance_discarded(1)
                if len(self._discarded) >= self._discard_limit:
                    self._collapse()
                    return [], stale, True
            else:
                batch.append(item.group)
                self._timings[id(item.group)] = item
        return batch, stale, False

    def _collapse(self) -> None:
        self.collapsed = True
        self.state.done = True
        self._status.write(
            f"Training stopped: model collapse suspected. {self._discard_limit} groups in a row since the last "
            "step had equal rewards for every trajectory, so there is nothing to learn from them. Try a lower "
            "learning rate, a reward that separates better from worse answers, more varied scenarios, or a "
            f"smaller batch; or raise discard_queue_multiplier (now {self.discard_queue_multiplier}) to wait longer."
        )

    def _log_checkpoint_history(self, step: int, metrics: dict[str, float]) -> None:
        """A `history.jsonl` row of `checkpoint/...` keys for `step`, named as they are (the reference's
        row: no split prefix), read back by the retention strategy."""
        self.model._log_metrics(metrics, split="train", step=step, route=False)

    def _train_kwargs(self, step: int) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "learning_rate": self.learning_rate,
            "loss_fn": self.loss_fn,
            "normalize_advantages": self.normalize_advantages,
        }
        if self.packed_sequence_length is not None:
            kwargs["packed_sequence_length"] = self.packed_sequence_length
        if self.megatron_topology is not None:
            kwargs["megatron_topology"] = self.megatron_topology
        if self.kl_penalty_coef > 0.0:
            kwargs["kl_penalty_coef"] = self.kl_penalty_coef
            if self.kl_penalty_step_lag is not None:
                kwargs["kl_penalty_reference_step"] = max(0, step - self.kl_penalty_step_lag)
        return kwargs

    async def _training_stage(self) -> None:
        step = self.state.next_training_step
        stop_at = None if self.max_steps is None else step + self.max_steps
        rollouts_ended = False
        while not rollouts_ended and (stop_at is None or step < stop_at) and not self._stop_requested:
            started = time.monotonic()
            batch, stale, rollouts_ended = await self._collect_batch(step)
            trainer_idle = time.monotonic() - started
            if stale:
                self.state.discarded_stale_groups += stale
                self._status.note_stale(stale)
            if not batch or self._stop_requested:
                break
            finished = [self._timings.pop(id(g)) for g in batch if id(g) in self._timings]
            actor_wall = sum(f.rollout_seconds for f in finished)
            actor_idle = sum(f.idle_seconds for f in finished)
            async with self.state.policy_updated:
                self.state.next_training_step = step + 1
                self.state.policy_updated.notify_all()
            self._status.note_training_start(len(batch))
            train_started = time.monotonic()
            try:
                result = await self.backend.train(self.model, batch, **self._train_kwargs(step))
            finally:
                self._status.note_training_end()
            train_seconds = time.monotonic() - train_started
            if result.step == step:  # nothing was trainable: the policy did not change
                note = getattr(result, "message", None) or "nothing was trainable"
                self._status.write(f"step {step + 1} not trained: {note}")
                async with self.state.policy_updated:
                    self.state.next_training_step = step
                    self.state.policy_updated.notify_all()
                continue
            step = result.step
            async with self.state.policy_updated:
                self.state.policy_version = self.state.next_training_step = step
                self.state.policy_updated.notify_all()
            await self._after_step(
                result, batch, started, train_seconds, trainer_idle, actor_wall, actor_idle
            )

    async def _after_step(
        self,
        result: TrainResult,
        batch: list[TrajectoryGroup],
        started: float,
        train_seconds: float,
        trainer_idle: float,
        actor_wall: float,
        actor_idle: float,
    ) -> None:
        step = result.step
        off_policy = [step - 1 - v for g in batch if (v := _initial_version(g)) is not None]
        seconds = time.monotonic() - started
        metrics: dict[str, float] = {
            "discarded_stale_groups": float(self.state.discarded_stale_groups),
            "steps_off_policy": statistics.fmean(off_policy) if off_policy else 0.0,
            "time/step_wall_s": seconds,
            "time/step_trainer_s": train_seconds,
            "throughput/step_trainer_idle_s": trainer_idle,
        }
        if actor_wall > 0:
            metrics["time/step_actor_s"] = actor_wall
        if actor_idle > 0:
            metrics["throughput/step_actor_idle_s"] = actor_idle
        metrics.update(result.metrics)
        await self.model.log(batch, split="train", step=step, metrics=metrics)
        if self._discarded:  # a sample of the groups that could not train, to look at
            await self.model.log(self._discarded[:50], split="discarded", step=step)
            self._discarded.clear()
        self._status.note_training_batch(batch, step=step, step_seconds=seconds)
        folder = self.model.storage.checkpoint_dir(step)
        created = folder.stat().st_mtime if folder.exists() else time.time()
        self._log_checkpoint_history(
            step, {CHECKPOINT_SAVED_METRIC: 1.0, CHECKPOINT_CREATED_AT_METRIC: created}
        )
        every = self.eval_every_n_steps
        if self.eval_fn is not None and every > 0 and step - self.state.last_eval_step >= every:
            await self._schedule_eval(step)
        await self._apply_retention(step)
        self._persist(step)

    # ---- evaluation ---------------------------------------------------------------------------
    async def _schedule_eval(self, step: int) -> None:
        assert self._eval_queue is not None
        if step in self._eval_stacks:
            return
        stack = AsyncExitStack()
        await stack.enter_async_context(self._lease(step, pin=False))  # keep its checkpoint until it ran
        self._eval_stacks[step] = stack
        self.state.last_eval_step = step
        await self._eval_queue.put(step)

    async def _eval_stage(self) -> None:
        assert self._eval_queue is not None
        while (step := await self._eval_queue.get()) is not None:
            await self._run_eval(step)

    async def _run_eval(self, step: int) -> None:
        assert self.eval_fn is not None
        self._status.note_val_started(step)
        reward: float | None = None
        try:
            started = time.monotonic()
            with self._metrics_context("eval"):
                async with self._lease(step, pin=True):
                    result = await self.eval_fn(self.model, step, self.config)
            seconds = time.monotonic() - started
            splits = result if isinstance(result, dict) else {"val": result}
            timing: dict[str, float] | None = {"time/step_eval_s": seconds}
            for split, items in splits.items():
                groups = [i for i in items if isinstance(i, TrajectoryGroup)]
                loose = [i for i in items if isinstance(i, Trajectory)]
                if loose:
                    groups.append(TrajectoryGroup(loose))
                rewards = [t.reward for g in groups for t in g.trajectories]
                if split == "val" and rewards:
                    reward = statistics.fmean(rewards)
                if groups:
                    await self.model.log(groups, split=split, step=step, metrics=timing)
                    timing = None
            if timing is not None:
                await self.model.log(None, split="val", step=step, metrics=timing)
            self._log_checkpoint_history(step, {CHECKPOINT_EVAL_COMPLETED_METRIC: 1.0})
            self.state.completed_eval_steps.add(step)
            self._persist(self.state.policy_version)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            self._status.write(f"evaluation of step {step} failed: {type(e).__name__}: {e}")
        finally:
            stack = self._eval_stacks.pop(step, None)
            if stack is not None:
                await stack.aclose()
            self._status.note_val_finished(step, reward)

    async def _status_loop(self) -> None:
        while True:
            await asyncio.sleep(min(1.0, self._status.log_interval_seconds / 10))
            self._status.log_if_due()

    # ---- checkpoints and state ----------------------------------------------------------------
    async def _checkpoint_infos(self) -> list[CheckpointInfo]:
        lister = getattr(self.backend, "list_checkpoints", None)
        if lister is not None:  # RemoteBackend: the checkpoints live on the server
            steps = [c.step for c in await lister(self.model)]
        else:
            steps = self.model.storage.checkpoint_steps()
        sums: dict[int, dict[str, list[float]]] = {}
        for row in self.model.storage.read_history():
            if isinstance(row.get("step"), int):
                for key, value in row.items():
                    numeric = isinstance(value, int | float) and not isinstance(value, bool)
                    if key != "step" and numeric and math.isfinite(value):
                        sums.setdefault(row["step"], {}).setdefault(key, []).append(float(value))
        infos = []
        for step in steps:
            metrics = {k: statistics.fmean(v) for k, v in sums.get(step, {}).items()}
            folder = self.model.storage.checkpoint_dir(step)
            created = metrics.get(CHECKPOINT_CREATED_AT_METRIC)
            if created is None:
                created = folder.stat().st_mtime if folder.exists() else time.time()
            infos.append(
                CheckpointInfo(
                    step=step,
                    path=str(folder),
                    created_at=datetime.fromtimestamp(created, UTC),
                    is_eval_step=step in self.state.completed_eval_steps
                    or metrics.get(CHECKPOINT_EVAL_COMPLETED_METRIC, 0.0) > 0
                    or any(k.startswith(("val/", "test/")) for k in metrics),
                    metrics=metrics,
                )
            )
        return sorted(infos, key=lambda c: c.step)

    def _protected_steps(self, step: int) -> set[int]:
        protected = {step, *self._leases, *self._eval_stacks}
        if self.kl_penalty_coef > 0.0 and self.kl_penalty_step_lag is not None:
            protected.update(range(max(0, step - self.kl_penalty_step_lag), step + 1))
        return protected

    async def _apply_retention(self, step: int) -> None:
        strategy = self.checkpoint_retention_strategy
        if strategy is None or step % self.checkpoint_retention_interval:
            return
        checkpoints = await self._checkpoint_infos()
        protected = self._protected_steps(step)
        eligible = [c for c in checkpoints if c.step not in protected]
        if not eligible:
            return
        keep = set(strategy(CheckpointRetentionContext(current_step=step, checkpoints=eligible)))
        doomed = {c.step for c in eligible} - keep
        if doomed:
            await self.backend.delete_checkpoints(self.model, sorted({c.step for c in checkpoints} - doomed))

    def _persist(self, step: int) -> None:
        self.model.merge_state(
            {
                PIPELINE_STATE_KEY: {
                    "scenario_offset": self.state.scenario_offset,
                    "total_scenarios_consumed": self.state.total_scenarios_consumed,
                    "training_step": step,
                    "last_eval_step": self.state.last_eval_step,
                    "completed_eval_steps": sorted(self.state.completed_eval_steps),
                }
            }
        )


__all__ = ["PIPELINE_STATE_KEY", "AllRolloutsFailedError", "PipelineTrainer", "make_group_rollout_fn"]
