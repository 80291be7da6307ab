"""`DelegatingBackend`: a test double that is an `art.Backend` passing every call to another one, so a test
changes one behaviour (a slow step, a measured one) and keeps the rest."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import art
from art.types import Registration, TrainResult, TrainSFTResult


class DelegatingBackend(art.Backend):
    """Every member of `art.Backend` goes to `inner`; subclasses override what they test."""

    def __init__(self, inner: art.Backend) -> None:
        self.inner = inner

    async def register(self, model: art.Model) -> Registration:
        return await self.inner.register(model)

    async def get_step(self, model: art.TrainableModel) -> int:
        return await self.inner.get_step(model)

    async def train(
        self, model: art.TrainableModel, trajectory_groups: Iterable[art.TrajectoryGroup], **kwargs: Any
    ) -> TrainResult:
        return await self.inner.train(model, trajectory_groups, **kwargs)

    async def train_sft(
        self,
        model: art.TrainableModel,
        trajectories: Iterable[art.Trajectory],
        *,
        verbose: bool = False,
        **kwargs: Any,
    ) -> TrainSFTResult:
        return await self.inner.train_sft(model, trajectories, verbose=verbose, **kwargs)

    async def delete_checkpoints(self, model: art.TrainableModel, steps_to_keep: Sequence[int]) -> None:
        await self.inner.delete_checkpoints(model, steps_to_keep)

    async def close(self) -> None:
        await self.inner.close()

    def record_path(self) -> str | None:
        return self.inner.record_path()

    def check_model(self, model: art.Model) -> None:
        self.inner.check_model(model)

    def _model_inference_name(self, model: art.Model, step: int | None = None) -> str:
        return self.inner._model_inference_name(model, step)

    @property
    def accepts_chat_template_kwargs(self) -> bool:
        return self.inner.accepts_chat_template_kwargs

    def supports_automatic_train_step_metrics(self) -> bool:
        return self.inner.supports_automatic_train_step_metrics()

    def automatic_gpu_cost_per_hour_usd(self, model: art.Model) -> float | None:
        return self.inner.automatic_gpu_cost_per_hour_usd(model)
