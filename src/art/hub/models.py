"""The models `art serve` hosts on one machine: a `ModelService` and a job queue each, one router for all.

Every model is keyed by (project, name) and served by the OpenAI-compatible routes under its own name
(`name`, `name@step`): the hub adds each model's engine to one `EngineRouter`, so one port serves them all.
Names must therefore be unique on a server: a second project with a model of the same name is refused
(409) rather than silently shadowed. A `base_model` that is a path must lie under one of the server's
`--base-model-root` folders (`check_base_model`); Hugging Face ids and short names are always accepted.

Base models to chat with (`art serve --model NAME`, `serve_chat_model`): an engine with no adapter and no
trainer, served under the name the operator typed (a short name, a Hugging Face id, a folder); not part
of any record, so not restored by `.serve/models.json` (the command line names them at every start). A
request for a name nothing serves is a 404 that lists what is served and says how to add a model
(`NOT_FOUND_HINT`).

Creating a model is idempotent (the same request finds the model already served, even while it is still
starting) and durable: the server's copy of the registration goes to the model's `model.json`, and the
list of served models to `.serve/models.json`, from which a restarted server restores them, each from
its newest complete checkpoint (the service's own resume), and settles the jobs the old process left.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from art.backends.remote_protocol import ModelCreate, ModelInfo, model_id
from art.base_model.default_model import is_default_model_name
from art.engines.base import Engine
from art.hub.jobs import ModelJobs
from art.openai_server.http import EngineRouter
from art.record.lock import RecordInUseError
from art.record.storage import (
    ModelStorage,
    atomic_write_text,
    disk_said,
    new_record_id,
    serve_models_path,
    storage_error,
)
from art.service.service import ModelService, ServiceConfig
from art.types import LoRAConfig, RuntimeOptions

logger = logging.getLogger(__name__)


NOT_FOUND_HINT = (
    "To chat with a base model, start the server with `art serve --model NAME` (a short name such as "
    "smollm2-135m, a Hugging Face id or a folder; repeatable); to train one, register an art.TrainableModel "
    "through art.RemoteBackend(url, api_key), which serves it as NAME and NAME@STEP."
)
"""What a 404 for an unknown model says after the served names (docs/remote.md, "Chat with a base model")."""


class HubError(Exception):
    """A request the hub refuses; `status` is the HTTP status to answer with, `param` the field at fault."""

    def __init__(self, status: int, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.param = param


_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")


def check_base_model(base_model: str, roots: Sequence[Path]) -> None:
    """Refuse (HubError 422) a `base_model` that names a folder on the server outside `roots` (the
    `--base-model-root` folders); Hugging Face ids and short names (`smollm2-135m`) pass. Decided before
    anything on the disk is opened, and answered the same whether that path exists or not, so a client
    learns nothing about the server's files. A symbolic link counts where it leads."""
    if is_default_model_name(base_model) or (
        _HUB_ID.match(base_model) and ".." not in base_model and not Path(base_model).exists()
    ):
        return  # a short name or a Hugging Face id (not a folder of the server's working directory)
    resolved = Path(base_model).expanduser().resolve()
    if any(resolved.is_relative_to(root.expanduser().resolve()) for root in roots):
        return
    where = ", ".join(str(r) for r in roots) or "none are configured"
    raise HubError(
        422,
        f"base_model {base_model!r} is a path on the server outside the folders it loads models from "
        f"(--base-model-root: {where}). Give a Hugging Face id, a short name such as smollm2-135m, or a "
        "folder under one of those roots (start art serve with --base-model-root DIR to add one).",
        param="base_model",
    )


def check_available(base_model: str) -> None:
    """Refuse (HubError 422, param base_model) a base model that is not there to load on this server: the
    one line of `art.base_model.check` (what was tried, what is known, what to do)."""
    from art.base_model.check import check_base_model_available
    from art.common.errors import BaseModelNotFoundError

    try:
        check_base_model_available(base_model)
    except BaseModelNotFoundError as e:
        raise HubError(422, str(e), param="base_model") from None


def start_error(spec: ModelCreate, exc: Exception) -> HubError:
    """Why a model could not be served, as the API answers it: 409 when another writer holds its record,
    507 when the disk refused a write (what it said, without paths), else 422 blaming `base_model`."""
    if isinstance(exc, RecordInUseError):
        return HubError(409, f"model {spec.project}/{spec.name} cannot be served: {exc}", param="name")
    disk = storage_error(exc)
    if disk is not None:
        return HubError(
            507,
            f"model {spec.project}/{spec.name} could not be served: the server's disk refused a write "
            f"({disk_said(disk)}). Nothing was changed; free space on the server and try again.",
        )
    return HubError(
        422,
        f"base_model {spec.base_model!r} could not be loaded: {type(exc).__name__}: {exc}",
        param="base_model",
    )


@dataclass
class HostedModel:
    """One served model: what it was created with, its service and its jobs."""

    spec: ModelCreate
    service: ModelService
    jobs: ModelJobs
    gpu_cost_per_hour_usd: float | None = None  # the server's price per GPU (None: known GPUs only)
    record_id: str | None = None  # the record's id in its model.json (`ModelInfo.record_id`)

    @property
    def id(self) -> str:
        return model_id(self.spec.project, self.spec.name)

    def info(self) -> ModelInfo:
        """The model as the API describes it."""
        engine = self.service.engine
        prefix = f"{self.spec.name}@"
        names = (
            []
            if engine is None
            else [n for n in engine.model_names() if n == self.spec.name or n.startswith(prefix)]
        )
        return ModelInfo(
            id=self.id,
            project=self.spec.project,
            name=self.spec.name,
            base_model=self.spec.base_model,
            lora_config=self.spec.lora_config or LoRAConfig(),
            step=self.service.step,
            record_id=self.record_id,
            inference_names=sorted(names),
            hourly_cost_usd=self.service.hourly_cost_usd(self.gpu_cost_per_hour_usd),
        )


class ServiceHub:
    """Hosts trainable models under one folder (`path`, as `LocalBackend`'s `.art`).

    Example:
        hub = ServiceHub(Path(".art"), RuntimeOptions(device="cpu"))
        await hub.restore()
        hosted, created = await hub.create(ModelCreate(project="p", name="m", base_model="smollm2-135m"))
        app = create_app(hub.router, api_key=key)
    """

    def __init__(
        self,
        path: Path,
        options: RuntimeOptions,
        *,
        progress: bool = True,
        gpu_cost_per_hour_usd: float | None = None,
        base_model_roots: Sequence[Path] = (),
    ) -> None:
        self.path = Path(path)
        self.base_model_roots = tuple(Path(r) for r in base_model_roots)  # where base_model paths may be
        self.options = options
        self.progress = progress
        self.gpu_cost_per_hour_usd = gpu_cost_per_hour_usd  # per GPU; each model's info gives its hourly cost
        self.router = EngineRouter(not_found_hint=NOT_FOUND_HINT)
        self.models: dict[tuple[str, str], HostedModel] = {}
        self.chat_models: dict[str, Engine] = {}  # base models served for chat only, by the name given
        self._starting: dict[tuple[str, str], asyncio.Task[HostedModel]] = {}
        self._served: dict[tuple[str, str], ModelCreate] = {}  # what `.serve/models.json` lists

    # ---- models ----------------------------------------------------------------------------------
    async def create(self, spec: ModelCreate) -> tuple[HostedModel, bool]:
        """Serve the model `spec` describes (once); returns it and whether this call started it."""
        check_base_model(spec.base_model, self.base_model_roots)
        key = (spec.project, spec.name)
        if key not in self.models and key not in self._starting:
            await asyncio.to_thread(check_available, spec.base_model)  # 422 naming what was tried
        hosted = self.models.get(key)
        if hosted is not None:
            self._check_same(hosted.spec, spec)
            return hosted, False
        task = self._starting.get(key)
        if task is not None:
            hosted = await asyncio.shield(task)
            self._check_same(hosted.spec, spec)
            return hosted, False
        self._check_free(spec)
        task = asyncio.ensure_future(self._start(spec))
        self._starting[key] = task
        # Forgotten when done, whoever awaits it: a failed start can be asked again; a caller that goes
        # away (a client that disconnected) does not cancel a start others may be waiting for.
        task.add_done_callback(lambda _: self._starting.pop(key, None))
        return await asyncio.shield(task), True

    def get(self, project: str, name: str) -> HostedModel:
        """A served model, or HubError 404 naming what is served."""
        hosted = self.models.get((project, name))
        if hosted is None:
            served = ", ".join(sorted(h.id for h in self.models.values())) or "none"
            raise HubError(
                404,
                f"model {project}/{name} is not served here (served: {served}); create it with "
                "POST /v1/art/models (RemoteBackend.register does)",
            )
        return hosted

    def find_job(self, job_id: str) -> ModelJobs:
        """The job queue that holds `job_id`, or HubError 404."""
        for hosted in self.models.values():
            if hosted.jobs.get(job_id) is not None:
                return hosted.jobs
        raise HubError(404, f"no training job {job_id!r} on this server")

    def _check_same(self, served: ModelCreate, asked: ModelCreate) -> None:
        for field in ("base_model", "lora_config"):
            have, want = getattr(served, field), getattr(asked, field)
            if field == "lora_config":
                have, want = have or LoRAConfig(), want or LoRAConfig()
            if have != want:
                raise HubError(
                    409,
                    f"model {served.project}/{served.name} is already served with {field}={have!r}, not "
                    f"{want!r}; use another model name (nothing was changed)",
                    param=field,
                )

    def _check_free(self, spec: ModelCreate) -> None:
        if spec.name in self.chat_models:
            raise HubError(
                409,
                f"{spec.name!r} is a base model served here for chat (art serve --model); the OpenAI routes "
                "name models by `name`, so use another model name",
                param="name",
            )
        taken = {**{k: h.spec for k, h in self.models.items()}, **{k: None for k in self._starting}}
        for (project, name), served in taken.items():
            if name == spec.name and project != spec.project:
                raise HubError(
                    409,
                    f"a model named {name!r} is already served here for project {project!r}; the OpenAI "
                    "routes name models by `name` (and `name@step`), so names must be unique on a server: "
                    "use another model name",
                    param="name",
                )
            if served is not None and spec.name == served.base_model:
                raise HubError(
                    409,
                    f"{spec.name!r} is the base model of {project}/{name}, served under that name; use "
                    "another model name",
                    param="name",
                )
        storage = ModelStorage(self.path, spec.project, spec.name)
        existing = storage.read_model_json()
        if existing is not None and existing.get("base_model") not in (None, spec.base_model):
            raise HubError(
                409,
                f"model {spec.project}/{spec.name} was trained here on base_model={existing['base_model']!r}, "
                f"not {spec.base_model!r}; use another model name (nothing was changed)",
                param="base_model",
            )

    async def _start(self, spec: ModelCreate) -> HostedModel:
        storage = ModelStorage(self.path, spec.project, spec.name)
        lora = spec.lora_config or LoRAConfig()
        config = ServiceConfig(
            base_model=spec.base_model, lora=lora, options=self.options, writer="art serve"
        )
        service = ModelService(spec.name, storage, config)
        logger.info("starting %s/%s on %r", spec.project, spec.name, spec.base_model)
        try:
            await service.start()
            record_id = self._write_registration(storage, spec)
            jobs = ModelJobs(storage, service, progress=self.progress)
            settled = jobs.recover()
        except Exception as e:
            await service.close()
            raise start_error(spec, e) from e
        for job in settled:
            logger.warning(
                "training job %s of %s/%s was left unfinished by the previous server: %s",
                job.id,
                spec.project,
                spec.name,
                job.error or (job.result.message if job.result else job.status),
            )
        jobs.start()
        hosted = HostedModel(
            spec=spec,
            service=service,
            jobs=jobs,
            gpu_cost_per_hour_usd=self.gpu_cost_per_hour_usd,
            record_id=record_id,
        )
        self.models[(spec.project, spec.name)] = hosted
        assert service.serving_engine is not None
        self.router.add(service.serving_engine)  # older steps a request names load on demand
        try:
            self._write_served_list()
        except OSError as e:  # the model is served; only a restart would not bring it back by itself
            logger.error(
                "could not update %s (%s): %s/%s is served now, but a restarted server will not restore it "
                "until a client registers it again",
                serve_models_path(self.path),
                e,
                spec.project,
                spec.name,
            )
        return hosted

    def _write_registration(self, storage: ModelStorage, spec: ModelCreate) -> str:
        """Write the server's copy of the registration; returns the record's id (made the first time)."""
        record: dict[str, Any] = storage.read_model_json() or {}
        record.update(
            name=spec.name,
            project=spec.project,
            trainable=True,
            base_model=spec.base_model,
            lora_config=(spec.lora_config or LoRAConfig()).model_dump(),
        )
        record.setdefault("created_at", datetime.now(UTC).isoformat())
        record.setdefault("record_id", new_record_id())
        storage.write_model_json(record)
        return str(record["record_id"])

    def _write_served_list(self) -> None:
        for hosted in self.models.values():
            self._served[(hosted.spec.project, hosted.spec.name)] = hosted.spec
        entries = [spec.model_dump(mode="json") for spec in self._served.values()]
        atomic_write_text(serve_models_path(self.path), json.dumps({"models": entries}, indent=2) + "\n")

    async def restore(self) -> list[str]:
        """Serve again every model this folder's server served before; returns their ids. A model that
        fails to start is logged and skipped (the others still come up)."""
        path = serve_models_path(self.path)
        if not path.exists():
            return []
        try:
            entries = json.loads(path.read_text(encoding="utf-8"))["models"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            logger.error("%s is unreadable (%s); no model restored", path, e)
            return []
        specs = []
        for entry in entries:
            try:
                spec = ModelCreate.model_validate(entry)
            except ValueError as e:
                logger.error("%s: skipping an unreadable entry %s: %s", path, entry, e)
                continue
            self._served[(spec.project, spec.name)] = spec  # kept in the list even if it fails to start
            specs.append(spec)
        restored = []
        for spec in specs:
            try:
                hosted, _ = await self.create(spec)
            except Exception as e:
                logger.error("could not restore %s/%s: %s", spec.project, spec.name, e)
                continue
            restored.append(hosted.id)
        return restored

    async def serve_chat_model(self, base_model: str) -> Engine:
        """Serve `base_model` (a short name, a Hugging Face id or a folder) for chat only, under that very
        name: loaded with the server's options (device, dtype, engine), no adapter, no trainer, no record.
        Serving one name twice returns the engine already serving it. Raises what the check or the load
        raised (`BaseModelNotFoundError`: one line saying what was tried)."""
        engine = self.chat_models.get(base_model)
        if engine is not None:
            return engine
        if base_model in {hosted.spec.name for hosted in self.models.values()}:
            raise ValueError(
                f"{base_model!r} is the name of a trainable model served here; the OpenAI routes name models "
                "by name, so it cannot also be a base model to chat with"
            )
        from art.base_model.check import check_base_model_available

        await asyncio.to_thread(check_base_model_available, base_model)
        logger.info("loading %r to chat with (no training)", base_model)
        engine = await start_chat_engine(self.options, base_model)
        self.chat_models[base_model] = engine
        self.router.add(engine)
        return engine

    async def close(self, *, job_timeout: float | None = None) -> None:
        """Settle the jobs (the running one may finish within `job_timeout` s), then stop every service and
        every engine serving a base model for chat."""
        for hosted in list(self.models.values()):
            await hosted.jobs.close(timeout=job_timeout)
        for hosted in list(self.models.values()):
            if hosted.service.serving_engine is not None:
                self.router.remove(hosted.service.serving_engine)
            await hosted.service.close()
        self.models.clear()
        for engine in list(self.chat_models.values()):
            self.router.remove(engine)
            await engine.close()
        self.chat_models.clear()


async def start_chat_engine(options: RuntimeOptions, base_model: str) -> Engine:
    """An engine serving `base_model` under that name, for chat only: the server's engine (`options.engine`)
    on its device and dtype, started as a service starts its own, without the trainer. An engine in this
    process (torch) serves the model loaded here; one in another process (vLLM) loads its own copy, so only
    the tokenizer loads here."""
    from types import SimpleNamespace

    from art.base_model.default_model import resolve_base_model
    from art.base_model.loader import (
        choose_dtype,
        cuda_device_count,
        load_model_and_tokenizer,
        resolve_device,
    )
    from art.common.engine_traits import ENGINE_TRAITS
    from art.engines.factory import check_dtype, check_engine_available, start_engine
    from art.kernels.threads import in_fresh_thread

    check_engine_available(options)
    device = resolve_device(options.device)
    dtype = choose_dtype(options.dtype, device)
    check_dtype(options, str(dtype), str(device))
    if ENGINE_TRAITS[options.engine].in_process:
        model, tokenizer = await asyncio.to_thread(
            in_fresh_thread, lambda: load_model_and_tokenizer(base_model, dtype=dtype, device=device)
        )
    else:
        from transformers import AutoTokenizer

        source = await asyncio.to_thread(resolve_base_model, base_model)
        tokenizer = await asyncio.to_thread(AutoTokenizer.from_pretrained, source)
        model = SimpleNamespace(dtype=dtype)  # what such an engine reads of the model: its dtype
    engine = await start_engine(
        options,
        base_model=base_model,
        model=model,
        tokenizer=tokenizer,
        device=str(device),
        cuda_devices=cuda_device_count(),
    )
    await engine.warm_up()
    return engine
