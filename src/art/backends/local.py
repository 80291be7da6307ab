"""`LocalBackend`: the service in this process (engine, trainer and an OpenAI-compatible server per model).

Registering a trainable model loads its base model once, wraps it with a LoRA adapter, resumes from the
newest checkpoint on disk, and starts a server on 127.0.0.1 (a free port) that serves the base model under
its own name and the adapter as `{name}@{step}` (and `{name}` for the latest step). Heavy imports (torch,
transformers, fastapi) happen only here, at registration.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from ..trajectories import TrajectoryGroup
from ..types import LoRAConfig, RuntimeOptions, TrainResult
from .base import (
    Registration,
    prepare_groups_for_training,
    prompted_model_registration,
    train_spec_from_kwargs,
)

if TYPE_CHECKING:
    from ..model import Model, TrainableModel
    from ..service.server import ServerThread
    from ..service.service import ModelService


@dataclass
class _Served:
    service: ModelService
    server: ServerThread
    base_url: str


class LocalBackend:
    """Runs each registered trainable model's service in this process, on CPU or GPU.

    Args:
        host: interface the servers bind to (loopback by default).
        port: port of the first server; 0 picks free ports.
        api_key: the Bearer key the servers require; a random one by default.
        device: "auto" (a CUDA GPU where there is one, else the CPU), "cpu", "cuda" or "cuda:N".
        engine: "torch" (built in, the CPU default) or "vllm".
        dtype: "bfloat16", "float32"...; None picks bf16 where the hardware supports it.
        max_num_seqs: how many sequences the engine decodes together.
        max_model_len: the context window served (None: the model's).
        options: all runtime switches at once (`art.RuntimeOptions`); the keywords above, when given,
            override its fields. Environment variables (`art.types.ENV_OVERRIDES`) override both, read here.
        progress: show progress bars while training.

    Example:
        backend = LocalBackend(device="cpu")
        await model.register(backend)
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        api_key: str | None = None,
        device: str | None = None,
        engine: str | None = None,
        dtype: str | None = None,
        max_num_seqs: int | None = None,
        max_model_len: int | None = None,
        options: RuntimeOptions | None = None,
        progress: bool = True,
        in_process: bool = True,
    ) -> None:
        if not in_process:
            raise ValueError(
                "LocalBackend runs the service in this process; use RemoteBackend for another one"
            )
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
        self.progress = progress
        self._served: dict[tuple[str, str, str], _Served] = {}
        self._starting: dict[tuple[str, str, str], asyncio.Task[_Served]] = {}

    @staticmethod
    def _key(model: Model) -> tuple[str, str, str]:
        return (str(model.storage.base_path.resolve()), model.project, model.name)

    async def register(self, model: Model) -> Registration:
        """Start the model's service and server (once; later calls return the same endpoint)."""
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
        from ..service.server import ServerThread, create_app
        from ..service.service import ModelService, ServiceConfig

        config = ServiceConfig(
            base_model=model.base_model, lora=model.lora_config or LoRAConfig(), options=self.options
        )
        service = ModelService(model.name, model.storage, config)
        await service.start()
        assert service.engine is not None
        server = ServerThread(create_app(service.engine, api_key=self.api_key))
        port = self.port + len(self._served) if self.port else 0
        base_url = await asyncio.to_thread(server.start, self.host, port)
        return _Served(service=service, server=server, base_url=base_url)

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

    async def train(
        self, model: TrainableModel, trajectory_groups: Iterable[TrajectoryGroup], **kwargs: Any
    ) -> TrainResult:
        """One training step. Keyword arguments are `art.TrainSpec` fields (learning_rate, loss_fn, ...)."""
        spec = train_spec_from_kwargs(**kwargs)
        groups = prepare_groups_for_training(trajectory_groups)
        return await self._get(model).service.train(groups, spec, progress=self.progress)

    async def delete_checkpoints(self, model: TrainableModel, steps_to_keep: Sequence[int]) -> None:
        """Delete every checkpoint except `steps_to_keep` and the newest."""
        await self._get(model).service.delete_checkpoints(steps_to_keep)

    async def close(self) -> None:
        """Stop every server and engine."""
        for served in list(self._served.values()):
            await asyncio.to_thread(served.server.stop)
            await served.service.close()
        self._served.clear()

    async def __aenter__(self) -> LocalBackend:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
