"""`ServerlessBackend`: train through the serverless training API (the reference's class, same name and
constructor), against W&B's hosted service or `art serve` (`base_url="http://host:7999/v1"`, its key).

The model is served and trained on the server; rollouts sample from it through the model's
`openai_client()` (the same base URL and key) under the reference's names,
`wandb-artifact:///{entity}/{project}/{name}` (the newest step) and `...:step{N}`. `backend.train(model,
groups, **kwargs)` takes one step: the keywords are those of `LocalBackend.train` (checked the same way),
sent as the job's `experimental_config`; the result is a `ServerlessTrainResult` whose metrics are the
reference's names. It does not log: call `model.log(...)`, as with the reference.

    backend = ServerlessBackend(api_key=key, base_url="http://gpu-box:7999/v1")
    await model.register(backend)
    result = await backend.train(model, groups, learning_rate=1e-5)
    await model.log(groups, metrics=result.metrics, step=result.step, split="train")

Not here: `train_sft` (the service's SFT reads W&B artifacts; use `RemoteBackend` with `art serve`), and the
W&B artifact helpers (`_experimental_pull_model_checkpoint`, forks, S3 pushes).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, ClassVar, cast

from art.backends.base import RefusesSFT, prepare_groups_for_training
from art.backends.serverless_client import Client
from art.backends.train_options import resolve_train_kwargs
from art.metrics.taxonomy import (
    TRAIN_GRADIENT_STEPS_KEY,
    average_metric_samples,
    build_training_summary_metrics,
    summarize_trajectory_groups,
)
from art.model import Backend
from art.rollout.leases import pin_inference_step, pinned_inference_step
from art.trajectories import TrajectoryGroup
from art.types import Registration, ServerlessTrainResult

if TYPE_CHECKING:
    from art.model import Model, TrainableModel

# The fields of the reference's `ExperimentalTrainingConfig`: `backend.train` keywords sent to the service.
EXPERIMENTAL_CONFIG_FIELDS = frozenset(
    {
        "advantage_balance", "allow_training_without_logprobs", "epsilon", "epsilon_high",
        "importance_sampling_level", "kimi_k2_tau", "kl_penalty_coef", "kl_penalty_reference_step",
        "kl_penalty_source", "kl_penalty_step_lag", "kl_ref_adapter_path", "learning_rate",
        "logprob_calculation_chunk_size", "loss_fn", "mask_prob_ratio",
        "max_negative_advantage_importance_sampling_weight", "normalize_advantages",
        "num_trajectories_learning_rate_multiplier_power", "packed_sequence_length", "plot_tensors",
        "precalculate_logprobs", "scale_learning_rate_by_reward_std_dev", "scale_rewards",
        "truncated_importance_sampling",
    }
)  # fmt: skip
POLL_SECONDS = 0.5


class ServerlessBackend(RefusesSFT, Backend):
    """Train through the serverless training API (see the module docstring). `api_key` defaults to
    `WANDB_API_KEY`, `base_url` to W&B's service.

    Example:
        backend = art.ServerlessBackend(api_key=key, base_url="http://gpu-box:7999/v1")  # an `art serve`
        await model.register(backend)
        result = await backend.train(model, groups, learning_rate=1e-5)
    """

    # The service's SFT jobs read W&B artifacts, and `art serve` trains RL only: fine-tune where the model is.
    SFT_REFUSAL: ClassVar[str] = (
        "ServerlessBackend.train_sft is not available here: the serverless SFT API reads W&B artifacts. "
        "Fine-tune with art.LocalBackend on the machine that has the model (model.train_sft), "
        "or `art sft FILE` there"
    )

    def __init__(self, *, api_key: str | None = None, base_url: str | None = None) -> None:
        self._client = Client(api_key=api_key, base_url=base_url)
        self._base_url = str(self._client.base_url)

    async def close(self) -> None:
        """Close the connections to the service."""
        await self._client.close()

    async def __aenter__(self) -> ServerlessBackend:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    # ---- models --------------------------------------------------------------------------------------
    async def register(self, model: Model) -> Registration:
        """Create (or find) the model on the service; sets `model.id`, `model.entity`, `model.run_id`."""
        if not model.trainable:
            raise ValueError(
                f"model {model.name!r} is not trainable: ServerlessBackend serves and trains TrainableModels; "
                "call a prompted model through its own inference_base_url"
            )
        info = await self._client.create_model(
            entity=model.entity,
            project=model.project,
            name=model.name,
            base_model=getattr(model, "base_model", ""),
        )
        model.id, model.entity, model.run_id = info.id, info.entity, info.run_id
        step = await self.get_step(cast("TrainableModel", model))
        return Registration(base_url=self._base_url, api_key=self._client.api_key, step=step)

    async def _prepare_backend_for_training(self, model: Model, config: Any = None) -> tuple[str, str]:
        """The reference's hook: (base URL, key) of the model's inference endpoint."""
        return self._base_url, self._client.api_key

    def _model_inference_name(self, model: Model, step: int | None = None) -> str:
        """`wandb-artifact:///{entity}/{project}/{name}`, with `:step{N}` for a step (or the step pinned by
        `adapter_lease`)."""
        if model.entity is None:
            raise ValueError(
                f"model {model.name!r} has no entity yet: register it with the ServerlessBackend first"
            )
        if step is None:
            step = pinned_inference_step(model.name)
        base = f"wandb-artifact:///{model.entity}/{model.project}/{model.name}"
        return base if step is None else f"{base}:step{step}"

    @asynccontextmanager
    async def adapter_lease(self, model: TrainableModel, step: int) -> AsyncIterator[None]:
        """Rollouts in the block sample from `step` (`get_inference_name()` names it)."""
        async with pin_inference_step(model.name, step):
            yield

    @asynccontextmanager
    async def exact_adapter_lease(self, model: TrainableModel, step: int) -> AsyncIterator[None]:
        """openpipe-art 0.5.23's name for a lease on exactly `step`: here `adapter_lease`."""
        async with self.adapter_lease(model, step):
            yield

    async def get_step(self, model: TrainableModel) -> int:
        """The model's newest checkpoint on the service (0 before any)."""
        if model.id is None:
            raise ValueError(f"model {model.name!r} is not registered with this ServerlessBackend")
        newest = await self._client.list_checkpoints(model_id=model.id, order="desc", limit=1)
        return newest[0].step if newest else 0

    async def _get_step(self, model: TrainableModel) -> int:
        """The reference's name for `get_step`."""
        return await self.get_step(model)

    async def delete_checkpoints(self, model: TrainableModel, steps_to_keep: Sequence[int]) -> None:
        """Delete every checkpoint on the service but `steps_to_keep` (the newest is never deleted)."""
        assert model.id is not None, "register the model first"
        latest = await self.get_step(model)
        steps = [c.step for c in await self._client.list_checkpoints(model_id=model.id)]
        doomed = [s for s in steps if s not in steps_to_keep and s != latest]
        if doomed:
            await self._client.delete_checkpoints(model_id=model.id, steps=doomed)

    async def _delete_checkpoint_files(self, model: TrainableModel, steps_to_keep: Sequence[int]) -> None:
        """The reference's name for `delete_checkpoints`."""
        await self.delete_checkpoints(model, steps_to_keep)

    # ---- training ------------------------------------------------------------------------------------
    async def train(
        self, model: TrainableModel, trajectory_groups: Iterable[TrajectoryGroup], **kwargs: Any
    ) -> ServerlessTrainResult:
        """One training step on the service (see the module docstring); raises `RuntimeError` naming the
        service's reason when the job fails."""
        assert model.id is not None, "register the model first"
        options = resolve_train_kwargs(kwargs)  # typos and bad values fail here, before anything is sent
        groups = prepare_groups_for_training(
            trajectory_groups, without_logprobs=options.spec.allow_training_without_logprobs
        )
        config = {k: v for k, v in kwargs.items() if k in EXPERIMENTAL_CONFIG_FIELDS and v is not None}
        config.setdefault("learning_rate", options.spec.learning_rate)
        started = time.monotonic()
        job = await self._client.create_training_job(
            model_id=model.id, trajectory_groups=groups, experimental_config=config
        )
        samples = [metrics async for metrics in self._follow(job, groups)]
        metrics = average_metric_samples(samples)
        metrics.setdefault("time/step_trainer_s", time.monotonic() - started)
        step = await self.get_step(model)
        artifact = f"{model.entity}/{model.project}/{model.name}:step{step}" if model.entity else None
        if options.verbose:
            print(f"step {step}: metrics {metrics}")
        return ServerlessTrainResult(step=step, metrics=metrics, artifact_name=artifact)

    async def _follow(self, job_id: str, groups: list[TrajectoryGroup]) -> AsyncIterator[dict[str, float]]:
        """The job's `gradient_step` metrics (with the groups' data counts) until it ends."""
        base = build_training_summary_metrics(
            summarize_trajectory_groups(groups), include_trainable_groups=True
        )
        after: str | None = None
        sequences = 0.0
        while True:
            for event in await self._client.job_events(job_id=job_id, after=after):
                after = event.id
                if event.type == "training_started":
                    sequences = float(event.data.get("num_sequences") or 0)
                elif event.type == "gradient_step":
                    numbers = {k: float(v) for k, v in event.data.items() if isinstance(v, int | float)}
                    yield {**base, TRAIN_GRADIENT_STEPS_KEY: sequences, **numbers}
                elif event.type == "training_ended":
                    return
                elif event.type == "training_failed":
                    reason = event.data.get("error_message", "training failed with an unknown error")
                    raise RuntimeError(f"Training job failed: {reason}")
            await asyncio.sleep(POLL_SECONDS)
