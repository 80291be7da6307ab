"""`art.TinkerBackend`: train and serve an ART `TrainableModel` through any Tinker-API server (`art serve`,
Thinking Machines' Tinker, or another implementation), with the official `tinker` SDK.

The reference's name and arguments (`tinker_api_key`, `in_process`, `path`), plus `base_url` (the SDK's
`TINKER_BASE_URL` when not given). Rollouts use `model.openai_client()` as with any backend: a local
OpenAI-compatible server whose generations are Tinker samples; `backend.train(model, groups, ...)` tokenises
the groups here and takes the step on the Tinker server (`art.backends.tinker_run` says how). This module is
light: the SDK (which imports torch where it is installed) loads at the first registration.

Example:
    backend = art.TinkerBackend(tinker_api_key="tml-...", base_url="http://127.0.0.1:7999")  # e.g. art serve
    await model.register(backend)
    result = await backend.train(model, groups, learning_rate=1e-5)
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from art.backends.base import RefusesSFT, inference_name, prompted_model_registration, train_spec_from_kwargs
from art.model import Backend, Model, TrainableModel
from art.trajectories import TrajectoryGroup
from art.types import Registration, TrainResult

if TYPE_CHECKING:
    from art.backends.tinker_run import TinkerRun


class TinkerBackend(RefusesSFT, Backend):
    """The `Backend` protocol through a Tinker-API server (see the module docstring).

    Args:
        tinker_api_key: the server's key (it starts with `tml-`); None reads `TINKER_API_KEY`.
        in_process: the reference's switch for where its service runs; here the SDK's client always runs in
            this process (kept so the reference's calls work unchanged).
        path: where the models' records go (as `LocalBackend(path=...)`); None: each model's `base_path`.
        base_url: the server, e.g. "http://127.0.0.1:7999" for `art serve`; None: the SDK's default
            (`TINKER_BASE_URL`, else Thinking Machines' service).

    Example:
        backend = art.TinkerBackend(tinker_api_key="tml-...", base_url="http://127.0.0.1:7999")
        await model.register(backend)
    """

    SFT_REFUSAL: ClassVar[str] = (
        "TinkerBackend: supervised fine-tuning is not available here ({project}/{name}); use the tinker "
        "SDK's cross_entropy forward_backward directly, or art.LocalBackend"
    )

    def __init__(
        self,
        *,
        tinker_api_key: str | None = None,
        in_process: bool = False,
        path: str | None = None,
        base_url: str | None = None,
    ) -> None:
        key = tinker_api_key if tinker_api_key is not None else os.environ.get("TINKER_API_KEY")
        if not key:
            raise ValueError("TINKER_API_KEY is not set and no tinker_api_key was provided")
        self.api_key = key
        self.in_process = in_process
        self.path = path
        self.base_url = base_url
        self._service: Any = None
        self._runs: dict[tuple[str, str], TinkerRun] = {}

    def record_path(self) -> str | None:
        return self.path

    def _run(self, model: Model) -> TinkerRun:
        run = self._runs.get((model.project, model.name))
        if run is None:
            raise RuntimeError(f"model {model.name!r} is not registered with this TinkerBackend")
        return run

    async def register(self, model: Model) -> Registration:
        """Create (or resume) the model's training client on the server and serve it here (idempotent)."""
        if self.path is not None:
            model.base_path = self.path
        if not model.trainable:
            return prompted_model_registration(model, "TinkerBackend")
        key = (model.project, model.name)
        if key not in self._runs:
            import tinker

            from art.backends.tinker_run import TinkerRun

            if self._service is None:
                self._service = tinker.ServiceClient(base_url=self.base_url, api_key=self.api_key)
            assert isinstance(model, TrainableModel)
            self._runs[key] = await TinkerRun.start(model, self._service, self.api_key)
        run = self._runs[key]
        return Registration(base_url=run.base_url, api_key=self.api_key, step=run.step)

    async def get_step(self, model: TrainableModel) -> int:
        return self._run(model).step

    def _model_inference_name(self, model: Model, step: int | None = None) -> str:
        run = self._runs.get((model.project, model.name)) if model.trainable else None
        return inference_name(model, None if run is None else run.step, step)

    async def train(
        self, model: TrainableModel, trajectory_groups: Iterable[TrajectoryGroup], **kwargs: Any
    ) -> TrainResult:
        """One step on the Tinker server; keyword arguments are `art.TrainSpec` fields (loss_fn cispo or ppo)."""
        spec = train_spec_from_kwargs(**kwargs)
        run = self._run(model)
        groups = list(trajectory_groups)
        base_step = run.step
        result = await run.train(groups, spec)
        model.record_trained_step(groups, result, base_step)
        return result

    async def delete_checkpoints(self, model: TrainableModel, steps_to_keep: Sequence[int]) -> None:
        """Stop serving the steps not kept (the server keeps its checkpoints: delete them there)."""
        run = self._run(model)
        for step in [s for s in run.engine.samplers if s not in steps_to_keep and s != run.step]:
            run.engine.unload_adapter(f"{model.name}@{step}")

    async def close(self) -> None:
        """Stop the local servers and end the SDK's session."""
        runs, self._runs = self._runs, {}
        for run in runs.values():
            await run.close()
        if self._service is not None:
            service, self._service = self._service, None
            service.close("success")
