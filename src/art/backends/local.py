"""`LocalBackend`: the service in this process (engine, trainer and an OpenAI-compatible server per model).

Registering a trainable model loads its base model once, wraps it with a LoRA adapter, resumes from the
newest checkpoint on disk, and starts a server on 127.0.0.1 (a free port) that serves the base model under
its own name and the adapter as `{name}@{step}` (and `{name}` for the newest step, from registration on).
The last few steps stay loaded (`max_loaded_adapters`); an older step still on disk loads again when a
request names it. Heavy imports (torch, transformers, fastapi) happen only here, at registration.

Also importable as `art.LocalBackend`, `art.local.LocalBackend` and `art.local.backend.LocalBackend`, with
the reference's signature (`in_process`, `path`, ...) plus our own keywords.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
import warnings
from collections import Counter
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ValidationError

from art.backends.base import (
    StepWaits,
    inference_name,
    prepare_groups_for_training,
    prepare_sft_trajectories,
    prompted_model_registration,
    sft_spec_from_kwargs,
)
from art.backends.internal_config import configured_chat_template, resolve_internal_config
from art.backends.train_options import resolve_train_kwargs
from art.common.engine_traits import ENGINE_TRAITS
from art.common.waits import waiting
from art.metrics.gpu import check_gpu_cost_per_hour_usd
from art.metrics.taxonomy import average_metric_samples, reference_train_metrics
from art.model import Backend
from art.rollout.leases import pin_inference_step
from art.trajectories import Trajectory, TrajectoryGroup
from art.types import (
    LocalTrainResult,
    LoRAConfig,
    Registration,
    RejectedCheckpoint,
    RuntimeOptions,
    TrainResult,
    TrainSFTResult,
    TrainSharding,
    TrainSpec,
)

if TYPE_CHECKING:
    from art.model import Model, TrainableModel
    from art.openai_server.http import ServerThread
    from art.record.s3 import ExcludableOption
    from art.service.service import ModelService


@dataclass
class _Served:
    service: ModelService
    server: ServerThread
    base_url: str


class LocalBackend(Backend):
    """Runs each registered trainable model's service in this process, on CPU or GPU.

    Args (the reference's first):
        in_process: the service always runs in this process here; False is accepted with a warning.
        path: where the models' records live (`{path}/{project}/models/{name}/`); registering a model
            sets its `base_path` to it. None: each model's own `base_path` (".art" by default).
        gpu_cost_per_hour_usd: the hourly price in USD of one GPU, for the `costs/gpu` that `model.log`
            adds to each step's "train" row (the step's wall time x the price x the GPUs the model's service
            uses; a service on the CPU counts as one, so the price of the machine works there). None: known
            GPUs are priced on their own (`art.metrics.gpu`, the reference's table: H200 at $3),
            anything else logs no cost rather than guess.
        enable_expert_replay: the reference's (MoE replay); no effect here (False warns).
        host: interface the servers bind to (loopback by default).
        port: port of the first server; 0 picks free ports.
        api_key: the Bearer key the servers require; a random one by default.
        device: "auto" (a CUDA GPU where there is one, else the CPU), "cpu", "cuda" or "cuda:N".
        engine: "torch" (built in, the CPU default) or "vllm".
        dtype: "bfloat16", "float32"...; None picks bf16 where the hardware supports it.
        max_num_seqs: how many sequences the engine decodes together.
        max_model_len: the context window served (None: the model's).
        max_loaded_adapters: how many trained steps stay loaded (at least 1; default 4). A rollout naming
            an older step still on disk loads it again (a short wait) rather than failing.
        train_ranks: torch.distributed ranks that train each RL step (gloo on CPUs, NCCL on dedicated
            GPUs), started and supervised by the service; 1 (the default): this process's trainer alone.
            See docs/scale.md.
        train_sharding: how the ranks share the model: "ddp" (the default: each rank holds the whole base)
            or "fsdp2" (base and adapter sharded across the ranks, for a base too big for one device).
        options: all runtime switches at once (`art.RuntimeOptions`); the keywords above, when given,
            override its fields. Environment variables (`art.types.ENV_OVERRIDES`) override both, read here.
            A model's `_internal_config` (the reference's `art.dev` settings) sets the fields neither sets.
        progress: show progress bars while training.

    Usable as `async with LocalBackend() as backend:` and, as in the reference, `with LocalBackend() as
    backend:` (both close every server and engine at the end).

    Example:
        backend = LocalBackend(device="cpu")
        await model.register(backend)
    """

    def __init__(
        self,
        *,
        in_process: bool = True,
        path: str | None = None,
        gpu_cost_per_hour_usd: float | None = None,
        enable_expert_replay: bool = True,
        host: str = "127.0.0.1",
        port: int = 0,
        api_key: str | None = None,
        device: str | None = None,
        engine: str | None = None,
        dtype: str | None = None,
        max_num_seqs: int | None = None,
        max_model_len: int | None = None,
        max_loaded_adapters: int | None = None,
        train_ranks: int | None = None,
        train_sharding: TrainSharding | None = None,
        options: RuntimeOptions | None = None,
        progress: bool = True,
    ) -> None:
        if not in_process:
            warnings.warn(
                "LocalBackend(in_process=False): the service always runs in this process here (the option "
                "has no effect); for a service in another process or machine use `art serve` and "
                "RemoteBackend",
                stacklevel=2,
            )
        self.gpu_cost_per_hour_usd = check_gpu_cost_per_hour_usd(gpu_cost_per_hour_usd)
        if not enable_expert_replay:
            warnings.warn(
                "LocalBackend(enable_expert_replay=False) has no effect here (no MoE replay)", stacklevel=2
            )
        self.path = path
        self.host = host
        self.port = port
        self.api_key = api_key or f"art-{secrets.token_hex(16)}"
        given = {
            k: v
            for k, v in (
                ("device", device),
                ("engine", engine),
                ("dtype", dtype),
                ("max_num_seqs", max_num_seqs),
                ("max_model_len", max_model_len),
                ("max_loaded_adapters", max_loaded_adapters),
                ("train_ranks", train_ranks),
                ("train_sharding", train_sharding),
            )
            if v is not None
        }
        base = options or RuntimeOptions()
        try:
            merged = base.model_validate({**base.model_dump(), **given}) if given else base
        except ValidationError as e:
            problems = "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors())
            raise ValueError(f"LocalBackend: invalid option(s): {problems}") from None
        self.options = merged.with_env_overrides()
        # fields the user chose (here or in `options`): a model's reference settings do not override them
        self._chosen = set(given) | (options.model_fields_set if options is not None else set())
        self.progress = progress
        self._served: dict[tuple[str, str, str], _Served] = {}
        self._starting: dict[tuple[str, str, str], asyncio.Task[_Served]] = {}
        self._leases: dict[tuple[str, str, str], Counter[int]] = {}  # steps a rollout or evaluation uses

    @staticmethod
    def _key(model: Model) -> tuple[str, str, str]:
        return (str(model.storage.base_path.resolve()), model.project, model.name)

    def record_path(self) -> str | None:
        return self.path

    def check_model(self, model: Model) -> None:
        """Before `Model.register` writes anything: a trainable model's base model must be there to load
        here (`art.base_model.check`; `BaseModelNotFoundError` with one line saying what was tried)."""
        base_model = getattr(model, "base_model", None)
        if model.trainable and isinstance(base_model, str):
            from art.base_model.check import check_base_model_available

            check_base_model_available(base_model)

    async def register(self, model: Model) -> Registration:
        """Start the model's service and server (once; later calls return the same endpoint)."""
        if self.path is not None:
            model.base_path = self.path
        if not model.trainable:
            return prompted_model_registration(model, "LocalBackend")
        key = self._key(model)
        if key not in self._served:
            task = self._starting.get(key)
            if task is None:
                task = asyncio.ensure_future(self._start(model))  # type: ignore[arg-type]
                self._starting[key] = task
            try:
                self._served[key] = await task
            finally:
                self._starting.pop(key, None)
        served = self._served[key]
        return Registration(base_url=served.base_url, api_key=self.api_key, step=served.service.step)

    async def _start(self, model: TrainableModel) -> _Served:
        from art.openai_server.http import ServerThread, create_app
        from art.service.service import ModelService, ServiceConfig

        await asyncio.to_thread(self.check_model, model)  # also when called without `Model.register`
        options = self._options_for(model)
        template = configured_chat_template(model._internal_config)
        if template is not None and not ENGINE_TRAITS[options.engine].takes_chat_template:
            raise ValueError(
                f"model {model.name!r}: _internal_config sets a chat template, which the vLLM engine does not "
                "take here (it would serve with the model's own template and train with this one); use "
                "engine='torch' or put the template in the model's tokenizer_config.json"
            )
        config = ServiceConfig(
            base_model=model.base_model,
            lora=model.lora_config or LoRAConfig(),
            options=options,
            writer="LocalBackend",
            chat_template=template,
        )
        service = ModelService(model.name, model.storage, config)
        # Each phase says what it waits for (loading, engine, trainer, kernels); this line covers the rest
        # (resuming the newest checkpoint and its canary), with a reminder every 15 s.
        with waiting(f"registering {model.name} ({model.base_model})", every=15):
            await service.start()
        assert service.serving_engine is not None
        server = ServerThread(create_app(service.serving_engine, api_key=self.api_key))
        port = self.port + len(self._served) if self.port else 0
        base_url = await asyncio.to_thread(server.start, self.host, port)
        return _Served(service=service, server=server, base_url=base_url)

    def _options_for(self, model: TrainableModel) -> RuntimeOptions:
        """This backend's options, with the model's reference settings (`_internal_config`,
        `_openai_client_config`) where they mean something here and the user chose nothing."""
        internal = resolve_internal_config(model._internal_config, model._server_config)
        updates = {
            name: value
            for name, value in internal.options().items()
            if value is not None and name not in self._chosen
        }
        if not updates:
            return self.options
        try:
            return self.options.model_validate({**self.options.model_dump(), **updates})
        except ValidationError as e:
            problems = "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors())
            raise ValueError(
                f"model {model.name!r}: its _internal_config gives invalid options: {problems}"
            ) from None

    def _get(self, model: Model) -> _Served:
        served = self._served.get(self._key(model))
        if served is None:
            raise RuntimeError(
                f"model {model.name!r} is not registered with this backend; call `await model.register(backend)`"
            )
        return served

    def service(self, model: Model) -> ModelService:
        """The in-process service of a registered model (engine, trainer, checkpoints)."""
        return self._get(model).service

    async def get_step(self, model: TrainableModel) -> int:
        """The newest published step of `model`."""
        return self._get(model).service.step

    def supports_automatic_train_step_metrics(self) -> bool:
        """Yes: `model.log` adds `time/step_wall_s` (and `costs/gpu`, see `gpu_cost_per_hour_usd`) to the
        "train" rows of models trained here (the reference's hook)."""
        return True

    def automatic_gpu_cost_per_hour_usd(self, model: Model) -> float | None:
        """What the GPUs `model`'s service uses cost per hour (USD), or None when unknown: the price given
        to the backend x the GPUs (a CPU service counts as one), else the sum of `AUTO_GPU_HOURLY_PRICING_USD`
        over the GPUs when every one of them is listed there (`art.metrics.gpu`)."""
        served = self._served.get(self._key(model)) if model.trainable else None
        if served is not None:
            return served.service.hourly_cost_usd(self.gpu_cost_per_hour_usd)
        if self.gpu_cost_per_hour_usd is None:  # not served here: its devices are unknown, no guess
            return None
        # not served here (yet): the price given x the training GPUs its `_internal_config` names (else one)
        internal = getattr(model, "_internal_config", None) or {}
        return self.gpu_cost_per_hour_usd * max(1, len(internal.get("trainer_gpu_ids") or []))

    def _model_inference_name(self, model: Model, step: int | None = None) -> str:
        """The name a rollout should send: `"{name}@{step}"`, the newest published step by default (the
        reference's hook, which `Model.get_inference_name` asks). A model not served here keeps its own."""
        served = self._served.get(self._key(model)) if model.trainable else None
        return inference_name(model, served.service.step if served is not None else None, step)

    async def _get_step(self, model: TrainableModel) -> int:
        """The reference's name for `get_step` (its Backend protocol's)."""
        return await self.get_step(model)

    async def train(
        self, model: TrainableModel, trajectory_groups: Iterable[TrajectoryGroup], **kwargs: Any
    ) -> LocalTrainResult:
        """One training step; it does not log (call `model.log(...)`, as with the reference).

        Keyword arguments are `art.TrainSpec` fields (learning_rate, loss_fn, ...) and every keyword of
        the reference's `LocalBackend.train` (see `art.backends.train_options`). The result names the new
        step, its metrics (the reference's names: `loss/train`, `data/step_num_groups_trainable`, ...; ours
        for the rest) and `checkpoint_path`, the step's adapter folder. If nothing was trainable (e.g. every
        group's rewards were equal) the step still advances, as in the reference, serving the same adapter,
        and `message` says why, as does a warning on the "art" logger (without `verbose`).
        """
        options = resolve_train_kwargs(kwargs)
        groups = prepare_groups_for_training(
            trajectory_groups, without_logprobs=options.spec.allow_training_without_logprobs
        )
        done: list[TrainResult] = []
        before = await self._get_step(model)
        samples = [m async for m in self._train_model(model, groups, options.spec, options.verbose, done)]
        # As the reference: the step's metrics are the mean of what `_train_model` yielded (one sample
        # here), and the step is the backend's after training (ours: the one the service published).
        metrics = reference_train_metrics(average_metric_samples(samples), groups)
        if done:
            model.record_trained_step(groups, done[0], before)
        step = done[0].step if done else await self._get_step(model)
        message = done[0].message if done else None
        folder = model.storage.checkpoint_dir(step)
        checkpoint = str(folder) if folder.exists() else None
        if options.verbose:
            print(f"step {step}: {message or 'trained'}; metrics {metrics}")
        return LocalTrainResult(step=step, metrics=metrics, message=message, checkpoint_path=checkpoint)

    async def _train_model(
        self,
        model: TrainableModel,
        groups: list[TrajectoryGroup],
        spec: TrainSpec,
        verbose: bool = False,
        done: list[TrainResult] | None = None,
    ) -> AsyncIterator[dict[str, float]]:
        """Take the step on the model's service; yields its metrics (the reference's hook, an async
        generator of metric samples) and appends the service's result to `done`."""
        service = self._get(model).service
        with StepWaits(f"step {model.name}@{service.step + 1}") as waits:  # says what a step waits for
            result = await service.train(groups, spec, progress=self.progress, on_event=waits.on_event)
        if done is not None:
            done.append(result)
        yield dict(result.metrics)

    async def train_sft(
        self,
        model: TrainableModel,
        trajectories: Iterable[Trajectory],
        *,
        verbose: bool = False,
        **kwargs: Any,
    ) -> TrainSFTResult:
        """Supervised fine-tuning, published as one new step. Keyword arguments are `art.types.SFTSpec`
        fields (learning_rate, batch_size, skip_invalid, ...). The trajectories are read as training goes:
        a generator over a file larger than memory works."""
        spec = sft_spec_from_kwargs(**kwargs)
        items, total_batches = prepare_sft_trajectories(trajectories, spec)
        service = self._get(model).service
        return await service.train_sft(
            items, spec, progress=self.progress, verbose=verbose, total_batches=total_batches
        )

    async def rejected_checkpoints(self, model: TrainableModel) -> list[RejectedCheckpoint]:
        """The checkpoints `model`'s service set aside (failed steps, corrupted ones), oldest first, with
        why; at most `RuntimeOptions.max_rejected_checkpoints` are kept."""
        return self._get(model).service.rejected_checkpoints()

    async def purge_rejected_checkpoints(self, model: TrainableModel) -> list[str]:
        """Delete every checkpoint `model`'s service set aside; returns their folder names."""
        return await self._get(model).service.purge_rejected_checkpoints()

    async def delete_checkpoints(self, model: TrainableModel, steps_to_keep: Sequence[int]) -> None:
        """Delete every checkpoint except `steps_to_keep`, the newest, and any step held by an
        `adapter_lease`/`adapter_retention_lease` (a rollout or evaluation still using it)."""
        leased = self._leases.get(self._key(model), Counter())
        await self._get(model).service.delete_checkpoints([*steps_to_keep, *leased])

    async def _delete_checkpoint_files(self, model: TrainableModel, steps_to_keep: Sequence[int]) -> None:
        """The reference's name for `delete_checkpoints` (used by its PipelineTrainer)."""
        await self.delete_checkpoints(model, steps_to_keep)

    @asynccontextmanager
    async def adapter_retention_lease(self, model: TrainableModel, step: int) -> AsyncIterator[None]:
        """Keep checkpoint `step` of `model` (not deleted, not unloaded by `prune_model_adapters`) while the
        block runs. Leases nest and count: the step is free when the last one ends."""
        leases = self._leases.setdefault(self._key(model), Counter())
        leases[step] += 1
        try:
            yield
        finally:
            leases[step] -= 1
            if leases[step] <= 0:
                del leases[step]

    @asynccontextmanager
    async def adapter_lease(self, model: TrainableModel, step: int) -> AsyncIterator[None]:
        """`adapter_retention_lease`, and `model.get_inference_name()` answers `"{name}@{step}"` inside the
        block (`art.adapter_leases.pin_inference_step`): a rollout's requests all go to the step it began on."""
        async with self.adapter_retention_lease(model, step), pin_inference_step(model.name, step):
            yield

    @asynccontextmanager
    async def exact_adapter_lease(self, model: TrainableModel, step: int) -> AsyncIterator[None]:
        """openpipe-art 0.5.23's lease on exactly `name@step` (its evaluations use it): here `adapter_lease`,
        which already keeps that checkpoint and sends the block's requests to it."""
        async with self.adapter_lease(model, step):
            yield

    async def prune_model_adapters(self, model: TrainableModel, *, retain_steps: set[int]) -> list[int]:
        """Unload the loaded adapters of `model` except `retain_steps`, leased steps and the newest, to free
        memory; their checkpoints stay on disk and load again if a request names them. Returns the
        unloaded steps."""
        leased = self._leases.get(self._key(model), Counter())
        return self._get(model).service.unload_adapters_except({*retain_steps, *leased})

    async def _experimental_pull_model_checkpoint(
        self,
        model: TrainableModel,
        *,
        step: int | Literal["latest"] | None = None,
        local_path: str | None = None,
        s3_bucket: str | None = None,
        prefix: str | None = None,
        verbose: bool = False,
    ) -> str:
        """Find a checkpoint on disk or in S3 and return the local folder it is in (the reference's method).

        `step` None or "latest": the newest checkpoint on disk (`{art_path}/{project}/models/{name}/
        checkpoints/`, `art_path` being this backend's `path` or the model's `base_path`) and, with
        `s3_bucket`, in S3 (the reference's layout under `prefix`); on a tie the local one is used. A
        checkpoint on disk is used as it is; one only in S3 is downloaded (the AWS CLI, as
        `_experimental_push_to_s3`), checked against its manifest, and put in place whole or not at all.
        Only S3 is asked when `s3_bucket` is given (`BACKUP_BUCKET` is not read here).

        Without `local_path` the folder is where this backend keeps the step (a download lands there, so
        `await model.register(backend)` resumes from it; refused while this backend serves the model).
        With `local_path` the checkpoint is copied or downloaded into that folder instead, which must be
        new or empty (FileExistsError otherwise); one that already holds this step's complete checkpoint
        is returned as it is. As with `RemoteBackend`, unlike the reference, which merges into it and
        keeps a copy of a download in its own folder too.

        Raises FileNotFoundError when the step exists nowhere looked (the message lists the steps that
        do), ValueError when there is no checkpoint at all for "latest".

        Example:
            folder = await backend._experimental_pull_model_checkpoint(model, s3_bucket="my-backups")
        """
        from art.record.s3_checkpoints import pull_model_checkpoint

        art_path = self.path or model.base_path
        return await pull_model_checkpoint(
            model.name, model.project, art_path=art_path, step=step, local_path=local_path,
            s3_bucket=s3_bucket, prefix=prefix, verbose=verbose,
            guard=lambda doing: self._refuse_if_served(model, art_path, doing),
        )  # fmt: skip

    async def _experimental_pull_from_s3(
        self,
        model: Model,
        *,
        s3_bucket: str | None = None,
        prefix: str | None = None,
        verbose: bool = False,
        delete: bool = False,
        only_step: int | Literal["latest"] | None = None,
        step: int | None = None,
        exclude: list[ExcludableOption] | None = None,
        latest_only: bool = False,
    ) -> None:
        """Download the model's folder from S3 (bucket: `s3_bucket` or `BACKUP_BUCKET`) before registering
        it, so training resumes from the backed-up checkpoints; the reference's method, with the AWS CLI.

        `only_step` pulls one checkpoint (a step, or "latest": the newest in S3; `step` and `latest_only`
        are its older spellings); `exclude` leaves "checkpoints", "logs" or "trajectories" out; `delete`
        removes local files that S3 lacks. Refused while this backend serves the model (its checkpoints
        would change under the running service): pull, then `await model.register(backend)`.

        Deprecated, as in the reference (a DeprecationWarning says so): to fetch one checkpoint use
        `_experimental_pull_model_checkpoint`; this method still works and still pulls logs too.

        Example:
            await backend._experimental_pull_from_s3(model, s3_bucket="my-backups", only_step="latest")
        """
        from art.record.s3_checkpoints import pull_model_backup

        warnings.warn(
            "_experimental_pull_from_s3 is deprecated; use _experimental_pull_model_checkpoint to fetch a "
            "checkpoint",
            DeprecationWarning,
            stacklevel=2,
        )
        art_path = self.path or model.base_path
        await pull_model_backup(
            model.name, model.project, art_path=art_path, s3_bucket=s3_bucket, prefix=prefix,
            verbose=verbose, delete=delete, only_step=only_step, step=step, exclude=exclude,
            latest_only=latest_only, guard=lambda doing: self._refuse_if_served(model, art_path, doing),
        )  # fmt: skip

    async def _experimental_push_to_s3(
        self,
        model: Model,
        *,
        s3_bucket: str | None = None,
        prefix: str | None = None,
        verbose: bool = False,
        delete: bool = False,
    ) -> None:
        """Upload the model's folder (checkpoints, history, trajectories, state) to S3 (bucket: `s3_bucket`
        or `BACKUP_BUCKET`); the reference's method, with the AWS CLI. `delete` removes from S3 what is
        no longer local. Checkpoints are committed by an atomic rename, so a push during training copies
        whole checkpoints only.

        Example:
            await backend._experimental_push_to_s3(model, s3_bucket="my-backups")
        """
        from art.record import s3

        await s3.push_model_to_s3(
            model.name,
            model.project,
            s3_bucket=s3_bucket,
            prefix=prefix,
            verbose=verbose,
            delete=delete,
            art_path=self.path or model.base_path,
        )

    async def _experimental_fork_checkpoint(
        self,
        model: Model,
        from_model: str,
        from_project: str | None = None,
        from_s3_bucket: str | None = None,
        not_after_step: int | None = None,
        verbose: bool = False,
        prefix: str | None = None,
    ) -> None:
        """Start `model` from another model's checkpoint (the reference's method): its newest checkpoint,
        or the newest at most `not_after_step`, is copied in under the same step number, so training
        resumes there. With `from_s3_bucket` that checkpoint is first pulled from S3 (see
        `_experimental_pull_from_s3`). Call it before `await model.register(backend)`.

        Refused, with the reason, when: this backend serves `model`; the source has no such checkpoint;
        the source was trained on another base model; `model` already has a checkpoint at that step or
        later. The source's training groups are not copied (they belong to its record, not this one's).

        Example:
            await backend._experimental_fork_checkpoint(model, from_model="agent-001", not_after_step=40)
            await model.register(backend)  # resumes from the forked step
        """
        from art.record.s3_checkpoints import fork_model_checkpoint

        art_path = self.path or model.base_path
        await fork_model_checkpoint(
            model.name, model.project, art_path=art_path, base_model=getattr(model, "base_model", None),
            from_model=from_model, from_project=from_project, from_s3_bucket=from_s3_bucket,
            not_after_step=not_after_step, verbose=verbose, prefix=prefix,
            guard=lambda doing: self._refuse_if_served(model, art_path, doing),
        )  # fmt: skip

    def _refuse_if_served(self, model: Model, art_path: str, doing: str) -> None:
        if (str(Path(art_path).resolve()), model.project, model.name) in self._served:
            raise RuntimeError(
                f"model {model.project}/{model.name} is being served by this backend; {doing} before "
                "`await model.register(backend)` (or after `await backend.close()`)"
            )

    async def close(self) -> None:
        """Stop every server and engine."""
        for served in list(self._served.values()):
            await asyncio.to_thread(served.server.close)
            await served.service.close()
        self._served.clear()

    async def __aenter__(self) -> LocalBackend:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __enter__(self) -> LocalBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        """Close from synchronous code, even inside a running event loop (the reference's
        `with LocalBackend() as backend:` in an `async def`): closing runs on a loop of its own."""
        errors: list[BaseException] = []

        def close() -> None:
            try:
                asyncio.run(self.close())
            except BaseException as exc:
                errors.append(exc)

        thread = threading.Thread(target=close, name="art-backend-close")
        thread.start()
        thread.join()
        if errors:
            raise errors[0]
