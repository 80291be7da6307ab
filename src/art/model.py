"""`Model` (any OpenAI-compatible model) and `TrainableModel` (a base model plus a LoRA adapter we train).

A model is registered with a backend, which serves it; `openai_client()` talks to that server.
`log(...)` writes the record on disk (via `storage`), `train(...)` takes one step through the backend
and logs it. Trainable models are served as `{name}@{step}`, one name per checkpoint, and as `{name}` for
the newest; the backend decides which name `get_inference_name()` returns (the reference's
`_model_inference_name` hook), so `backend.train(...)` alone keeps rollouts on the newest step.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import warnings
from collections.abc import AsyncIterator, Awaitable, Iterable, Iterator, Sequence
from contextvars import Token
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable

from openai import AsyncOpenAI, DefaultAsyncHttpxClient
from pydantic import ConfigDict, PrivateAttr, field_validator, model_validator

from art import integrations
from art.common.errors import ModelAlreadyRegisteredError
from art.common.readable import ReadableModel
from art.metrics.api_costs import CostSink
from art.metrics.builder import MetricsBuilder
from art.metrics.costs import CostCalculator
from art.metrics.taxonomy import average_metric_samples
from art.record.model_log import ModelLog, as_groups, check_groups, split_given
from art.record.storage import (
    HISTORY_RECORD_KEYS,
    ModelStorage,
    group_fingerprint,
    new_record_id,
    validate_name,
)
from art.record.undo import RegistrationUndo
from art.rollout.leases import pinned_inference_step
from art.rollout.openai_client import OpenAIChatCompletionsProxy, deep_merge
from art.trajectories import Trajectory, TrajectoryGroup
from art.types import LoRAConfig, Registration, TrainConfig, TrainResult, TrainSFTConfig, TrainSFTResult


def _merge_immutable(base: dict[str, Any], updates: dict[str, Any], path: str = "") -> dict[str, Any]:
    merged = dict(base)
    for key, value in updates.items():
        where = f"{path}.{key}" if path else str(key)
        if key not in merged:
            merged[key] = value
        elif isinstance(merged[key], dict) and isinstance(value, dict):
            merged[key] = _merge_immutable(merged[key], value, where)
        elif merged[key] != value:
            raise ValueError(
                f"W&B config is immutable once set. Conflicting value for {where!r}: {where!r} is "
                f"{merged[key]!r}, not {value!r}; use a new key for the new value"
            )
    return merged


logger = logging.getLogger("art")
_OpenAIChatCompletionsProxy = OpenAIChatCompletionsProxy  # the reference's name for it, in its module


@runtime_checkable
class Backend(Protocol):
    """What a `Model` needs of a backend, and all it asks: `Model` calls nothing else on one.

    `LocalBackend`, `RemoteBackend`, `ServerlessBackend` and `art.ray.RayBackend` subclass it, and take the
    defaults below where they have nothing to add; a backend of your own subclasses it too (registering an
    object that lacks a member is refused, naming it). `register` must be idempotent.

    Example:
        backend: art.Backend = art.LocalBackend()  # or art.RemoteBackend("http://gpu-box:7999")
        await model.register(backend)
        result = await backend.train(model, groups, learning_rate=1e-5)
    """

    async def register(self, model: Model) -> Registration:
        """Start (or find) the service for `model` and say where it is served."""
        ...

    async def get_step(self, model: TrainableModel) -> int:
        """The newest step (complete checkpoint) of `model`; 0 before any training."""
        ...

    async def train(
        self, model: TrainableModel, trajectory_groups: Iterable[TrajectoryGroup], **kwargs: Any
    ) -> TrainResult:
        """Take one training step; keyword arguments are `TrainSpec` fields (learning_rate, loss_fn...).
        The step's own record (what the trainer saw) is written by the model: `model.record_trained_step`.

        Example:
            result = await backend.train(model, groups, learning_rate=1e-5, loss_fn="ppo")
            await model.log(groups, split="train", metrics=result.metrics, step=result.step)
        """
        ...

    async def train_sft(
        self,
        model: TrainableModel,
        trajectories: Iterable[Trajectory],
        *,
        verbose: bool = False,
        **kwargs: Any,
    ) -> TrainSFTResult:
        """Supervised fine-tuning on `trajectories`, published as one new step; keyword arguments are
        `SFTSpec` fields (learning_rate, batch_size, skip_invalid...)."""
        ...

    async def delete_checkpoints(self, model: TrainableModel, steps_to_keep: Sequence[int]) -> None:
        """Delete every checkpoint of `model` except `steps_to_keep` (the newest is always kept)."""
        ...

    async def close(self) -> None:
        """Stop services and free resources."""
        ...

    # -- members with a default: a backend overrides what it knows better --------------------------------
    async def _get_step(self, model: TrainableModel) -> int:
        """The reference's name for `get_step`, the one `Model.get_step` asks (so a backend written for the
        reference answers with its own); by default `get_step`."""
        return await self.get_step(model)

    def _train_sft(
        self,
        model: TrainableModel,
        trajectories: Iterable[Trajectory],
        config: TrainSFTConfig,
        _config: dict[str, Any],
        verbose: bool = False,
    ) -> AsyncIterator[dict[str, float]]:
        """The reference's SFT hook, the one `Model.train_sft` iterates: each batch's metrics. A backend
        written for the reference yields them as it trains (the model then averages them and logs them at
        the step `_get_step` answers); by default, `train_sft`'s call, whose whole result the model keeps."""
        options: dict[str, Any] = {"learning_rate": config.learning_rate, "batch_size": config.batch_size}
        if config.assistant_turns != "all":  # (a backend of the reference's time may not know it)
            options["assistant_turns"] = config.assistant_turns
        options.update(_config)
        return SFTRun(self.train_sft(model, trajectories, verbose=verbose, **options))

    def record_path(self) -> str | None:
        """Where the backend keeps its models' records (`LocalBackend(path=...)`): `Model.register` then
        writes the record there (the model's `base_path` becomes it). None: the model's own `base_path`."""
        return None

    def check_model(self, model: Model) -> None:
        """What must hold before `Model.register` writes anything (run in a thread); raise to refuse.
        `LocalBackend`'s refuses a base model that is not there to load (`art.errors.BaseModelNotFoundError`)."""
        return None

    def _model_inference_name(self, model: Model, step: int | None = None) -> str:
        """The name a rollout of `model` should send (the reference's name for this hook): by default its
        own name (`inference_model_name` for a prompted model), with `@{step}` when a step is given. ART's
        backends answer `"{name}@{newest step}"`, so a loop that only calls `backend.train(...)` and
        `model.log(...)` stays on-policy."""
        return own_inference_name(model, step)

    @property
    def accepts_chat_template_kwargs(self) -> bool:
        """Whether the backend's server takes `chat_template_kwargs` in chat requests (the reference's vLLM
        does; ART's server refuses them, since the trainer would render otherwise)."""
        return False

    def supports_automatic_train_step_metrics(self) -> bool:
        """Whether the backend measures its steps, so `model.log` adds `time/step_wall_s` (and `costs/gpu`
        with `automatic_gpu_cost_per_hour_usd`) to the step's first "train" row (the reference's hook)."""
        return False

    def automatic_gpu_cost_per_hour_usd(self, model: Model) -> float | None:
        """The hourly price of the devices training `model`, for `costs/gpu`; None: not priced."""
        return None


class SFTRun:
    """What `Backend._train_sft` answers by default: its `train_sft` call as an async iterator over each
    batch's metrics (what the reference's backends yield), holding the call's `TrainSFTResult` once run."""

    def __init__(self, call: Awaitable[TrainSFTResult]) -> None:
        self._call = call
        self._batches: Iterator[dict[str, float]] | None = None
        self.result: TrainSFTResult | None = None

    def __aiter__(self) -> SFTRun:
        return self

    async def __anext__(self) -> dict[str, float]:
        if self._batches is None:
            self.result = await self._call
            self._batches = iter(self.result.batch_metrics)
        try:
            return next(self._batches)
        except StopIteration:
            raise StopAsyncIteration from None


def own_inference_name(model: Model, step: int | None = None) -> str:
    """A model's name for chat requests when no backend says otherwise: a trainable model's steps are
    `name@step` (its `inference_model_name` is such a name after register); a prompted model's is its
    `inference_model_name` (or `name`); `@{step}` when a step is given."""
    base = model.name if model.trainable else (model.inference_model_name or model.name)
    return base if step is None else f"{base}@{step}"


def check_backend(backend: object) -> None:
    """Refuse, naming what is missing, an object that is not a `Backend` (before anything is written)."""
    if isinstance(backend, Backend):
        return
    protocol = (
        n
        for n, v in vars(Backend).items()
        if not n.startswith("__") and (callable(v) or isinstance(v, property))
    )
    members = [m for m in protocol if not hasattr(backend, m)]
    raise TypeError(
        f"{type(backend).__name__} is not an art.Backend: it lacks {', '.join(sorted(members))}. Subclass "
        "art.Backend (its members with a default need no code) or use art.LocalBackend / art.RemoteBackend"
    )


class Model(ReadableModel):
    """Any OpenAI-compatible model, e.g. a prompted model to compare against the one you train.

    Example:
        baseline = art.Model(name="gpt-4.1-mini", project="demo",
                             inference_base_url="https://api.openai.com/v1", inference_api_key=key)
        client = baseline.openai_client()
        await client.chat.completions.create(model=baseline.get_inference_name(), messages=msgs)

    `id` and `run_id` (the reference's serverless backend's) are accepted and kept, with no effect here.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    name: str
    project: str
    inference_base_url: str | None = None
    inference_api_key: str | None = None
    inference_model_name: str | None = None
    base_path: str = ".art"
    config: Any = None
    trainable: bool = False
    entity: str | None = None
    # The reference's serverless backend's ids of the model and of its training run: accepted and kept (in
    # `model_dump`) so code passing them runs; no effect with LocalBackend or RemoteBackend.
    id: str | None = None
    run_id: str | None = None
    # Trackers to report logged steps to ("wandb", "weave", "langfuse"); None: W&B if WANDB_API_KEY is set.
    report_metrics: list[str] | None = None

    _backend: Backend | None = PrivateAttr(default=None)
    # One client per event loop: (the loop, its client). A client's connections belong to its loop.
    _clients: dict[int, tuple[asyncio.AbstractEventLoop | None, AsyncOpenAI]] = PrivateAttr(
        default_factory=dict
    )
    _registered_url: str | None = PrivateAttr(default=None)  # the endpoint the last registration set
    _wandb_config: dict[str, Any] = PrivateAttr(default_factory=dict)
    _log: ModelLog = PrivateAttr(default_factory=ModelLog)  # metrics builder, clocks, the log pipeline

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        return validate_name(value, "model name")

    @field_validator("project")
    @classmethod
    def _valid_project(cls, value: str) -> str:
        return validate_name(value, "project")

    @field_validator("report_metrics")
    @classmethod
    def _valid_trackers(cls, value: list[str] | None) -> list[str] | None:
        return integrations.check_report_metrics(value)

    @model_validator(mode="after")
    def _fits_the_filesystem(self) -> Model:
        self.storage.check_filesystem_limits()  # e.g. a name too long: refused now, not at the first write
        return self

    # ---- record ----------------------------------------------------------------------------
    @property
    def storage(self) -> ModelStorage:
        """The model's on-disk record (`{base_path}/{project}/models/{name}/`)."""
        return ModelStorage(self.base_path, self.project, self.name)

    def _registration_record(self) -> dict[str, Any]:
        return {"name": self.name, "project": self.project, "trainable": self.trainable}

    def _write_registration(self) -> None:
        record = self._registration_record()
        existing = self.storage.read_model_json() or {}
        for key in ("trainable", "base_model"):
            if key in existing and existing[key] != record.get(key):
                raise ModelAlreadyRegisteredError(
                    self.project, self.name, str(self.storage.root), key, existing[key], record.get(key)
                )
        record = {**existing, **record}  # what others keep there (record ids, a server's) stays
        record.setdefault("created_at", datetime.now(UTC).isoformat())
        record.setdefault("record_id", new_record_id())
        if record != existing:
            self.storage.write_model_json(record)

    # ---- backend ---------------------------------------------------------------------------
    async def register(self, backend: Backend) -> None:
        """Attach the model to `backend` (idempotent: registering twice with one backend is harmless).

        A backend with a `path` (`LocalBackend(path=...)`) keeps the record there: `base_path` becomes it.

        Checked first, before anything is written: the backend's own checks (`LocalBackend`: the base model
        is there to load, else `art.errors.BaseModelNotFoundError` naming what was tried), then the record
        (`ModelAlreadyRegisteredError` when it was made with another base model). A registration that fails
        (any reason: a load failure too) leaves no record behind (`art.record.undo`).

        Example:
            await model.register(art.LocalBackend(path=".art"))
        """
        if self._backend is backend:
            return
        check_backend(backend)
        path = backend.record_path()
        if path is not None and path != self.base_path:
            if "base_path" in self.model_fields_set:
                warnings.warn(
                    f"model {self.name!r}: base_path {self.base_path!r} is replaced by the backend's path "
                    f"{path!r}, where its record is kept",
                    stacklevel=2,
                )
            self.base_path = path
        await asyncio.to_thread(backend.check_model, self)  # e.g. the base model loads: before any write
        undo = RegistrationUndo(self.storage)
        try:
            self._write_registration()
            registration = await backend.register(self)
        except BaseException:
            undo.undo()
            raise
        self._backend = backend
        self._log.restart_step_clock()
        self._on_registered(registration.base_url, registration.api_key, registration.step)
        if self.trainable:
            from art.record.recovery import recover_unlogged_steps

            recover_unlogged_steps(self.storage)
        integrations.on_register(self)

    def _on_registered(self, base_url: str, api_key: str, step: int) -> None:
        # The backend's endpoint, unless the user gave one: registering again (a new backend, a new port)
        # moves a URL that an earlier registration set.
        if self.inference_base_url is None or self.inference_base_url == self._registered_url:
            self.inference_base_url = base_url
            self.inference_api_key = api_key
            self._registered_url = base_url
        self._clients.clear()

    def backend(self) -> Backend:
        """The backend this model is registered with (error if none)."""
        if self._backend is None:
            raise RuntimeError(
                f"model {self.name!r} is not registered with a backend; call `await model.register(backend)`"
            )
        return self._backend

    def openai_client(self) -> AsyncOpenAI:
        """An `openai.AsyncOpenAI` pointed at this model's server (one per event loop, reused).

        Example:
            client = model.openai_client()
            await client.chat.completions.create(model=model.get_inference_name(), messages=msgs)
        """
        pinned = self.__dict__.get("_openai_client")  # the reference caches its client here; code sets it
        if pinned is not None:
            return pinned  # type: ignore[no-any-return]
        if self.inference_base_url is None:
            raise RuntimeError(
                f"model {self.name!r} has no inference endpoint: register it with a backend first "
                "(`await model.register(backend)`) or pass inference_base_url=..."
            )
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        for key, (owner, _) in list(self._clients.items()):
            if owner is not None and owner.is_closed():  # its loop ended (an earlier asyncio.run)
                del self._clients[key]
        cached = self._clients.get(id(loop))
        client = cached[1] if cached is not None and cached[0] is loop else None
        if client is None or str(client.base_url).rstrip("/") != self.inference_base_url.rstrip("/"):
            # Our own httpx client: openai's default one closes itself, when garbage collected, with a task on
            # whichever loop runs then, which fails ("Event loop is closed") for a client of an ended loop.
            client = self._with_proxy(
                AsyncOpenAI(
                    base_url=self.inference_base_url,
                    api_key=self.inference_api_key or "EMPTY",
                    http_client=DefaultAsyncHttpxClient(),
                )
            )
            self._clients[id(loop)] = (loop, client)
        return client

    def _with_proxy(self, client: Any) -> Any:
        """`client` with its `chat.completions` behind `OpenAIChatCompletionsProxy` (prices each response,
        adds default request fields), also in the clients its `with_options` makes. It stays the plain
        `AsyncOpenAI` object otherwise."""
        client.chat.completions = OpenAIChatCompletionsProxy(
            client.chat.completions,
            self._record_openai_completion_costs,
            self._default_chat_completion_extra_body() if self._backend_takes_template_kwargs() else None,
        )
        with_options = client.with_options
        client.with_options = lambda *args, **kwargs: self._with_proxy(with_options(*args, **kwargs))
        return client

    def _backend_takes_template_kwargs(self) -> bool:
        """Whether the serving backend's server accepts `chat_template_kwargs` in requests (the reference's
        vLLM does; ours refuses them, since the trainer would render differently)."""
        return self._backend is not None and self._backend.accepts_chat_template_kwargs

    def _default_chat_completion_extra_body(self) -> dict[str, Any] | None:
        """What every chat request through `openai_client()` adds (the reference's): the
        `chat_template_kwargs` of `_internal_config`, if any; sent only to a server that accepts them."""
        internal = getattr(self, "_internal_config", None) or {}
        kwargs = internal.get("chat_template_kwargs")
        return None if kwargs is None else {"chat_template_kwargs": dict(kwargs)}

    def _record_openai_completion_costs(self, response: Any) -> None:
        """Price one chat completion from `openai_client()` (the reference's hook): a plain model's are not
        priced; `TrainableModel` prices them with its cost calculator."""

    def get_inference_name(self, step: int | None = None) -> str:
        """The model name to send in chat requests; `step` names a checkpoint (`"{name}@{step}"`).

        The registered backend decides (the reference's rule): `LocalBackend` answers `"{name}@{N}"` with
        N its newest published step, so rollouts stay on-policy whoever advanced the step; inside
        `art.adapter_leases.pin_inference_step(name, N)` the default step is N instead. Otherwise
        `inference_model_name` (or `name`), with `@{step}` when a step is given.

        Example:
            >>> art.Model(name="gpt-4o", project="p").get_inference_name(step=3)
            'gpt-4o@3'
        """
        if step is None:  # inside `pin_inference_step` (e.g. a PipelineTrainer rollout): that step
            step = pinned_inference_step(self.name)
        if self._backend is not None:
            return self._backend._model_inference_name(self, step=step)
        return own_inference_name(self, step)

    def litellm_completion_params(self, step: int | None = None) -> dict[str, Any]:
        """Keyword arguments for `litellm.completion(...)` / `acompletion(...)` to call this model (the
        reference's): model (with LiteLLM's `hosted_vllm/` provider prefix for trainable models), base_url,
        api_key, and temperature 1 (sample from the policy being trained). `step` picks a checkpoint.

            >>> await litellm.acompletion(messages=msgs, **model.litellm_completion_params())  # doctest: +SKIP
        """
        name = self.get_inference_name(step)
        return {
            "model": f"hosted_vllm/{name}" if self.trainable else name,
            "base_url": self.inference_base_url,
            "api_key": self.inference_api_key,
            "temperature": 1,
        }

    async def get_step(self) -> int:
        """The model's current step (0 for models that are not trained here)."""
        return 0

    # ---- logging ---------------------------------------------------------------------------
    async def log(
        self,
        trajectories: Iterable[Trajectory | TrajectoryGroup] | TrajectoryGroup | None = None,
        split: str = "val",
        *,
        metrics: dict[str, float] | None = None,
        step: int | None = None,
    ) -> None:
        """Record trajectories and metrics for `split` at `step` (default: the current step).

        Trajectories go losslessly to `trajectories/{split}/{step:04d}.jsonl`; aggregate metrics (reward
        mean and spread, exception rate, mean of each trajectory metric, `group_{name}` for group metrics)
        and `metrics` go to one line of `history.jsonl`, prefixed with the split (`val/reward`). Keys that
        already contain '/' are kept; `costs/...` and `{time,data,throughput}/step_...` (given here, or in
        trajectory or group metrics, where they are summed) join `metrics_builder()`'s step, written here too.

        Added on their own, as in the reference, unless `metrics` gives them: for `train`, `val` and `test`
        rows with trajectories, `data/step_num_scenarios`, `data/step_num_trajectories`,
        `data/step_num_groups_submitted` (and `data/step_num_groups_trainable` for `train`), and the
        distinct `scenario_id`s of the groups' metadata for `data/cum/num_unique_scenarios`
        (`art.metrics_taxonomy`); for the first `train` row of each step, with a backend that measures
        steps (`LocalBackend`, `RemoteBackend`), `time/step_wall_s` (seconds since the previous step's row,
        or since `register`) and, when the backend knows an hourly price, `costs/gpu`.

        Invalid trajectories are refused before anything is written. A group already recorded at this
        split and step (the same content, e.g. recovered from its checkpoint after a crash) is not
        written twice.

        Example:
            await model.log(val_groups, split="val", metrics={"val/win": 0.75})
        """
        validate_name(split, "split")
        groups = as_groups(trajectories)
        check_groups(groups)
        builder = self._log.builder_for_split(self.storage, split)
        given = split_given(builder, metrics)  # a refused key raises here, before anything is written
        if step is None:
            step = await self.get_step()
        provided = set(metrics or {})
        automatic = self._automatic_train_metrics(split, step, provided)
        entry = await self._log.entry(
            self.storage, groups, split, step, given, provided, automatic,
            builder=builder, trajectories_given=trajectories is not None,
        )  # fmt: skip
        if entry:
            self._log_metrics(entry, split, step, groups)
            self._log.save_totals(self.storage)

    def _log_metrics(
        self,
        metrics: dict[str, float],
        split: str,
        step: int,
        groups: list[TrajectoryGroup] | None = None,
        *,
        route: bool = True,
    ) -> dict[str, Any]:
        """Write one row of `history.jsonl` and report it to the trackers (the reference's writer): names
        routed by `art.metrics_taxonomy.route_metric_key` (`custom` -> `train/custom`, `reward/mean`
        kept), plus `training_step` (the step) and `time/wall_clock_sec` (seconds since this object was
        made); `route=False` keeps the names as given. Returns the row as written.

        Example:
            model._log_metrics({"custom": 1.0}, split="train", step=7)  # {"train/custom": 1.0, ...}
        """
        row = self._log.history_row(metrics, split, step, route=route)
        entry = self.storage.append_history(step, row)
        integrations.on_log(self, split, step, row, groups or [])  # after the row is safe on disk
        return entry

    def _get_wandb_run(self) -> Any:
        """The model's W&B run (started now if none is open), or None when W&B is not among the trackers
        (`report_metrics`; by default, when `WANDB_API_KEY` is unset). The reference's hook."""
        return integrations.wandb_run(self)

    def _automatic_train_metrics(self, split: str, step: int, provided: set[str]) -> dict[str, float]:
        """`time/step_wall_s` and `costs/gpu` for the first "train" row of `step`, where the backend says it
        measures steps (`supports_automatic_train_step_metrics()`) and, for the cost, knows an hourly price
        (`automatic_gpu_cost_per_hour_usd(model)`); keys in `provided` are the caller's and left alone."""
        backend = self._backend
        if split != "train" or backend is None or not backend.supports_automatic_train_step_metrics():
            return {}
        wall = self._log.step_wall_seconds(step, now=time.monotonic())
        if wall is None:
            return {}
        out: dict[str, float] = {}
        if "time/step_wall_s" not in provided:
            out["time/step_wall_s"] = wall
        hourly = backend.automatic_gpu_cost_per_hour_usd(self) if "costs/gpu" not in provided else None
        if isinstance(hourly, int | float) and math.isfinite(hourly):
            out["costs/gpu"] = wall * float(hourly) / 3600.0
        return out

    # ---- step metrics outside trajectories (the reference's "Tracking Metrics") --------------------
    def metrics_builder(self, cost_context: str | None = None) -> MetricsBuilder:
        """The model's `art.metrics.MetricsBuilder` ([docs/metrics.md]); `cost_context`: "train" or "eval".

        Example:
            with model.metrics_builder("eval").activate_context():
                await judge(...)  # a `@track_api_cost` function: costs/eval/... in the next "val" row
        """
        root = self._log.loaded_builder(self.storage)
        return root if cost_context is None else root.for_cost_context(cost_context)

    def activate_metrics_context(self, cost_context: str) -> Token[CostSink]:
        """Make `metrics_builder(cost_context)` the active one (`track_api_cost` adds there); returns a token.

        Example:
            token = model.activate_metrics_context("train")
            ...  # judge calls
            token.var.reset(token)
        """
        return self.metrics_builder(cost_context).activate()

    def safe_model_dump(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """`model_dump(...)` with `config` set to None: the user's config may hold what JSON cannot.

        Example:
            >>> art.Model(name="m", project="p", config=object()).safe_model_dump()["config"] is None
            True
        """
        given = kwargs.pop("exclude", None)
        exclude = {**given, "config": True} if isinstance(given, dict) else {*(given or ()), "config"}
        data = self.model_dump(*args, exclude=exclude, **kwargs)  # the config is never serialised
        data["config"] = None
        return data

    # ---- the user's own state, kept with the model (the reference's state.json) -----------------
    def read_state(self) -> dict[str, Any] | None:
        """What `overwrite_state`/`merge_state` saved in `state.json` in the model's folder, or None.

        Example:
            state = model.read_state() or {}
            start = state.get("dataset_offset", 0)  # resume where the last run stopped
        """
        return self.storage.read_state()

    def overwrite_state(self, state: dict[str, Any]) -> None:
        """Replace the saved state with `state` (JSON values only), atomically: a crash keeps the old one.

        Example:
            model.overwrite_state({"dataset_offset": 100, "best_step": 7})
        """
        self.storage.write_state(state)

    def write_state(self, state: dict[str, Any]) -> None:
        """Deprecated (as in the reference): use `overwrite_state()` or `merge_state()`."""
        warnings.warn(
            "write_state() is deprecated; use overwrite_state() or merge_state()",
            DeprecationWarning,
            stacklevel=2,
        )
        self.overwrite_state(state)

    def merge_state(self, state: dict[str, Any]) -> dict[str, Any]:
        """Deep-merge `state` into the saved state (nested dicts merge, other values replace); returns it.

        Example:
            model.merge_state({"progress": {"epoch": 2}})  # keeps every other key, and progress's others
        """
        merged = deep_merge(self.read_state() or {}, state)
        self.overwrite_state(merged)
        return merged

    @property
    def wandb_config(self) -> dict[str, Any]:
        """What `update_wandb_config` was given so far, merged (a copy)."""
        return dict(self._wandb_config)

    def update_wandb_config(self, config: dict[str, Any]) -> None:
        """Add `config` to the model's W&B run config: now if the run is open, else when it starts.

        As in the reference, a key once set cannot change: a different value raises ValueError naming it.

        Example:
            model.update_wandb_config({"dataset": "inbox-v2", "rollout": {"max_turns": 10}})
        """
        if not isinstance(config, dict):
            raise TypeError(f"config must be a dict, got {type(config).__name__}")
        self._wandb_config = _merge_immutable(self._wandb_config, config)
        integrations.update_wandb_config(self)

    def history(self) -> list[dict[str, Any]]:
        """Every logged history entry, oldest first.

        Example:
            print([row.get("val/reward") for row in model.history()])
        """
        return self.storage.read_history()


class RecordNotWrittenWarning(UserWarning):
    """A step trained and is served, but its record (groups, history line) could not be written yet."""


class TrainableModel(Model):
    """A base model (Hugging Face id, local path, or a short name such as "smollm2-135m") plus the LoRA
    adapter that ART trains. Served as `{name}@{step}`.

    Example:
        model = art.TrainableModel(name="agent-001", project="demo", base_model="Qwen/Qwen2.5-0.5B-Instruct")
        await model.register(art.LocalBackend())
        await model.train(groups, config=art.TrainConfig(learning_rate=1e-5))
    """

    base_model: str
    lora_config: LoRAConfig | None = None
    trainable: bool = True
    # openpipe-art 0.5.23 requires it (its record, W&B run and serverless name; `name` only the inference
    # alias): accepted and kept here, where `name` names all of them (a different run_name is warned about)
    run_name: str | None = None

    _step: int = PrivateAttr(default=0)
    # Steps that trained but whose record (`model.log`) could not be written (a full disk): written first
    # thing at the next `train` (and recovered from their checkpoints at the next `register` in any case).
    _unlogged: list[tuple[list[TrajectoryGroup], dict[str, float], int]] = PrivateAttr(default_factory=list)
    # The reference's engine/trainer settings (`art.dev.InternalModelConfig`): applied by the backend where
    # they mean something, warned about where not. Set by `_internal_config=` or by assignment.
    _internal_config: dict[str, Any] | None = PrivateAttr(default=None)
    _server_config: dict[str, Any] | None = PrivateAttr(default=None)
    _cost_calculator: CostCalculator | None = PrivateAttr(default=None)

    def __init__(self, **data: Any) -> None:
        internal_config = data.pop("_internal_config", None)
        super().__init__(**data)
        self._internal_config = internal_config
        if self.run_name is not None and self.run_name != self.name:
            warnings.warn(
                f"run_name={self.run_name!r} is kept but has no effect here: the record, the served model and "
                f"the W&B run are all named {self.name!r} (name=); openpipe-art 0.5.23 names its record and "
                "run by run_name. Pass the same value to both to keep the two layouts alike",
                UserWarning,
                stacklevel=2,
            )

    @property
    def cost_calculator(self) -> CostCalculator:
        """`(prompt_tokens, completion_tokens, context) -> {"costs/...": US$}` for completions through
        `openai_client()` in a metrics context (`art.costs.build_cost_calculator`); by default none (`{}`)."""
        return self._cost_calculator or _no_costs

    def set_cost_calculator(self, calculator: CostCalculator | None) -> None:
        """Price this model's own completions through `openai_client()` (None: stop).

        Example:
            model.set_cost_calculator(build_cost_calculator(ModelPricing(prefill=0.1, sample=0.3, train=0.3)))
        """
        self._cost_calculator = calculator

    def _record_openai_completion_costs(self, response: Any) -> None:
        """Add a chat completion's cost (the calculator's, in the active metrics context) to the step: its
        prompt tokens count once per choice (each of `n` samples pays the prompt), then its completion
        tokens. Nothing without a calculator, a context or a usage (streamed answers are not priced)."""
        calculator = self._cost_calculator
        usage = getattr(response, "usage", None)
        if calculator is None or usage is None:
            return
        try:
            builder = MetricsBuilder.get_active()
        except LookupError:
            return
        context = builder.cost_context.strip("/")
        if not context:
            return
        choices = max(len(getattr(response, "choices", None) or []), 1)
        prompt = int(getattr(usage, "prompt_tokens", 0) or 0) * choices
        completion = int(getattr(usage, "completion_tokens", 0) or 0)
        for key, usd in calculator(prompt, completion, context).items():
            if key.startswith("costs/"):
                builder.add_cost(key.removeprefix("costs/"), float(usd))

    def _registration_record(self) -> dict[str, Any]:
        record = super()._registration_record()
        record["base_model"] = self.base_model
        record["lora_config"] = (self.lora_config or LoRAConfig()).model_dump()
        return record

    def _on_registered(self, base_url: str, api_key: str, step: int) -> None:
        super()._on_registered(base_url, api_key, step)
        self._step = step

    async def register(self, backend: Backend, _openai_client_config: dict[str, Any] | None = None) -> None:
        """Attach the model to `backend`, which serves it. `_openai_client_config` (the reference's
        `art.dev.OpenAIServerConfig`): its `engine_args` apply where they mean something here."""
        if _openai_client_config is not None:
            self._server_config = dict(_openai_client_config)
        await super().register(backend)
        # as the reference: the name the backend serves the model under now (LocalBackend: "name@step")
        self.inference_model_name = backend._model_inference_name(self)

    def record_trained_step(
        self, groups: Sequence[TrajectoryGroup], result: TrainResult, step_before: int
    ) -> None:
        """What a backend hands the model after a training step (the model writes its record; backends do not):
        what the trainer saw of the step (`result.trainer_record`: advantages, per-token logprobs and ratios),
        beside the step's groups and keyed by each group's content (`trajectories/train/{step:04d}.trainer.jsonl`,
        `art.record.step_record`); and, whatever `verbose`, a WARNING on the "art" logger when the step
        trained nothing, saying why. Both ways of training reach it: `model.train(...)` and `backend.train(...)`
        followed by `model.log(...)`. A write that fails (a full disk) is a warning: the step is trained and served.
        """
        record = result.trainer_record
        if record is not None:
            record.step = result.step
            for trained in record.groups:
                if 0 <= trained.index < len(groups):
                    trained.fingerprint = group_fingerprint(groups[trained.index])
            try:
                self.storage.append_trainer_record("train", result.step, record)
            except OSError as exc:  # what the UI would show of a trained step is not worth failing it
                logger.warning(
                    "%s/%s: step %d is trained, but the trainer's record of it (advantages, token values) "
                    "could not be written: %s: %s",
                    self.project,
                    self.name,
                    result.step,
                    type(exc).__name__,
                    exc,
                )
        if result.step == step_before or result.metrics.get("num_gradient_steps") == 0:
            why = (result.message or "the trainer made no update").rstrip(".")
            where = (
                f"the model stays at step {result.step}"
                if result.step == step_before
                else f"step {result.step} serves the same adapter as step {step_before}"
            )
            logger.warning("%s/%s: %s; %s", self.project, self.name, why, where)

    async def get_step(self) -> int:
        """The newest trained step (asks the backend when registered, else the record on disk)."""
        if self._backend is not None:
            self._step = await self._backend._get_step(self)
            return self._step
        latest = self.storage.latest_checkpoint_step()
        return 0 if latest is None else latest

    async def train(
        self,
        trajectory_groups: Iterable[TrajectoryGroup],
        config: TrainConfig = TrainConfig(),  # noqa: B008 - immutable pydantic default, as in the reference API
        _config: dict[str, Any] | None = None,
        verbose: bool = False,
    ) -> TrainResult:
        """Take one training step on the groups, then log them (split "train") with the step's metrics.

        `_config` passes further training options (any `TrainSpec` field, e.g. `{"loss_fn": "ppo"}`).
        If training fails, the trajectories are still logged at the current step before the error
        propagates, so no rollout is lost. If the step trained but its record could not be written (a full
        disk), the step is returned as trained, with a `RecordNotWrittenWarning` and a `message` saying so;
        the record is written at the next `train()`, or recovered from the checkpoint at the next
        `register()`.

        Example:
            result = await model.train(groups, config=art.TrainConfig(learning_rate=1e-5))
        """
        groups = list(trajectory_groups)
        backend = self.backend()
        options: dict[str, Any] = {
            "learning_rate": config.learning_rate,
            "kl_penalty_coef": config.kl_penalty_coef,
            **(_config or {}),
        }
        await self._log_unlogged()
        try:
            result = await backend.train(self, groups, **options)
        except BaseException as exc:
            try:
                await self.log(groups, split="train")
            except Exception as log_exc:  # the step's own error stays the one raised: it says what was undone
                exc.add_note(
                    f"Its {len(groups)} group(s) could not be logged either "
                    f"({type(log_exc).__name__}: {log_exc}); they were not recorded."
                )
            raise
        self._step = result.step
        if result.message and verbose:
            print(result.message)
        try:
            await self.log(groups, metrics=result.metrics, step=result.step, split="train")
        except OSError as exc:  # the step was applied: never report it as failed (a retry would train twice)
            self._unlogged.append((groups, dict(result.metrics), result.step))
            note = (
                f"Step {result.step} was trained and is served, but its record (groups and history line) could "
                f"not be written: {type(exc).__name__}: {exc}. It is written at the next train() (and "
                "recovered from the step's checkpoint when the model registers again); do not train these "
                "groups again."
            )
            warnings.warn(note, RecordNotWrittenWarning, stacklevel=2)
            result.message = f"{result.message} {note}" if result.message else note
        return result

    async def _log_unlogged(self) -> None:
        """Write the record of trained steps `train` could not log (see `_unlogged`); warn if it still fails."""
        if not self._unlogged:
            return
        logged = {int(e["step"]) for e in self.history() if any(k.startswith("train/") for k in e)}
        pending = [item for item in self._unlogged if item[2] not in logged]  # not recovered meanwhile
        self._unlogged = []
        for i, (groups, metrics, step) in enumerate(pending):
            try:
                await self.log(groups, metrics=metrics, step=step, split="train")
            except OSError as exc:
                self._unlogged = pending[i:] + self._unlogged
                warnings.warn(
                    f"the record of step(s) {[s for _, _, s in self._unlogged]} still cannot be written "
                    f"({type(exc).__name__}: {exc}); trying again at the next train()",
                    RecordNotWrittenWarning,
                    stacklevel=3,
                )
                return

    async def train_sft(
        self,
        trajectories: Iterable[Trajectory],
        config: TrainSFTConfig | None = None,
        _config: dict[str, Any] | None = None,
        verbose: bool = False,
    ) -> TrainSFTResult:
        """Supervised fine-tuning on `trajectories`: one optimiser step per batch, then one new checkpoint,
        served as `{name}@{step}` like an RL step; the call's metrics are logged at that step (split
        "train": `loss/train`, `loss/learning_rate`, `data/step_trainer_tokens`, ...) and returned with each
        batch's.

        Every assistant turn is trained (plain dicts too, tool calls included); each conversation must end
        with one. `trajectories` may be a generator: it is read batch by batch. `_config` passes further
        options (any `art.types.SFTSpec` field, e.g. `{"skip_invalid": True}`). Switching between SFT and
        RL resets the optimizer state.

        Example:
            await model.train_sft(trajectories, art.TrainSFTConfig(learning_rate=1e-4, batch_size=4))
        """
        config = config or TrainSFTConfig()
        started = time.monotonic()
        run = self.backend()._train_sft(self, trajectories, config, dict(_config or {}), verbose)
        batch_metrics = [dict(metrics) async for metrics in run]
        if isinstance(run, SFTRun) and run.result is not None:
            result = run.result
        elif batch_metrics:  # a backend written for the reference: its batches, averaged, as it does
            metrics = average_metric_samples(batch_metrics)
            metrics.setdefault("time/step_trainer_s", time.monotonic() - started)
            result = TrainSFTResult(step=await self.get_step(), metrics=metrics, batch_metrics=batch_metrics)
        else:  # nothing trained: nothing to log, and no step to ask for
            result = TrainSFTResult(step=self._step)
        if result.message and verbose:
            print(result.message)
        self._step = result.step
        if result.batch_metrics:
            await self.log(None, split="train", metrics=result.metrics, step=result.step)
        return result

    async def delete_checkpoints(
        self, best_checkpoint_metric: str = "val/reward", *, higher_is_better: bool = True
    ) -> list[int]:
        """Delete all checkpoints but the latest and the best by `best_checkpoint_metric` in history.

        Returns the steps kept. If the metric was never logged (e.g. no validation yet), the best step is
        unknown: a warning names the metrics that exist and only the latest is kept, as in the reference.

        Example:
            kept = await model.delete_checkpoints("val/reward")  # e.g. [3, 10]: the best and the latest
        """
        history = self.history()
        by_step: dict[int, float] = {}
        for entry in history:
            if best_checkpoint_metric in entry and entry[best_checkpoint_metric] is not None:
                by_step[int(entry["step"])] = float(entry[best_checkpoint_metric])
        latest = await self.get_step()
        if by_step:
            sign = 1.0 if higher_is_better else -1.0
            # the latest of equally good steps wins
            best = max(by_step, key=lambda s: (sign * by_step[s], s))
            keep = sorted({latest, best})
        else:
            known = sorted({k for e in history for k in e if k not in HISTORY_RECORD_KEYS})
            warnings.warn(
                f"delete_checkpoints: no logged value of {best_checkpoint_metric!r} for model {self.name!r}, "
                f"so the best checkpoint is unknown; keeping only the latest (step {latest}). Logged "
                f"metrics: {', '.join(known) or 'none'}",
                stacklevel=2,
            )
            keep = [latest]
        await self.backend().delete_checkpoints(self, keep)
        return keep


def _no_costs(
    prompt_tokens: int | None, completion_tokens: int | None, cost_context: str
) -> dict[str, float]:
    return {}


__all__ = ["Model", "RecordNotWrittenWarning", "TrainableModel"]
