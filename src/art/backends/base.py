"""The `Backend` protocol: how a model reaches its service (in this process, or over HTTP).

A backend serves trainable models (an OpenAI-compatible endpoint per model), takes training steps on
groups of trajectories, and manages checkpoints. `LocalBackend` (backends/local.py) runs the service in
this process; `RemoteBackend` talks to `art serve`. Both accept the same `train(...)` keyword arguments,
validated here into one `TrainSpec`, and the same `train_sft(...)` keyword arguments, validated into one
`SFTSpec`.

The `Backend` protocol itself is `art.model.Backend` (what a `Model` needs of a backend, defined beside it);
re-exported here. Registration's shape is `art.types.Registration`.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
import threading
import warnings
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ValidationError

from art.backends.train_options import resolve_train_kwargs
from art.common.waits import waiting
from art.model import Model, TrainableModel
from art.rollout.training_input import check_training_groups
from art.trajectories import SFT_SKIP_HINT, Trajectory, TrajectoryGroup, describe_source
from art.types import Registration, SFTSpec, TrainSFTResult, TrainSpec

logger = logging.getLogger("art")


def prompted_model_registration(model: Model, backend: str) -> Registration:
    """Where a model that is not trainable is served: its own `inference_base_url` (backends serve only
    trainable models); an error naming the fix when it has none."""
    if model.inference_base_url is None:
        raise ValueError(
            f"model {model.name!r} is not trainable and has no inference_base_url; {backend} serves "
            "TrainableModel only. Pass inference_base_url for a prompted model."
        )
    return Registration(base_url=model.inference_base_url, api_key=model.inference_api_key or "")


def inference_name(model: Model, newest_step: int | None, step: int | None = None) -> str:
    """The name a rollout of `model` should send (both backends' `_model_inference_name`): `"{name}@{step}"`
    with `newest_step` (the newest step the backend serves) by default; a model the backend does not serve
    (`newest_step` None) keeps its own name, with `@{step}` when a step is given.

    Example:
        inference_name(model, newest_step=3)           # "agent@3"
        inference_name(model, newest_step=3, step=1)   # "agent@1"
    """
    if newest_step is None:
        # a trainable model's steps are `name@step` (its `inference_model_name` is such a name after register)
        base = model.name if model.trainable else (model.inference_model_name or model.name)
        return base if step is None else f"{base}@{step}"
    return f"{model.name}@{newest_step if step is None else step}"


def train_spec_from_kwargs(**kwargs: Any) -> TrainSpec:
    """Validate `Backend.train` keyword arguments (ours and the reference's, see `train_options`) into a
    `TrainSpec`, with an error that names a bad option and the fix."""
    return resolve_train_kwargs(kwargs).spec


SpecT = TypeVar("SpecT", bound=BaseModel)


def _spec_from_kwargs(cls: type[SpecT], what: str, kwargs: dict[str, Any]) -> SpecT:
    known = set(cls.model_fields)
    unknown = sorted(set(kwargs) - known)
    if unknown:
        raise TypeError(
            f"unknown {what} option(s) {', '.join(map(repr, unknown))}; "
            f"known options: {', '.join(sorted(known))}"
        )
    try:
        return cls(**kwargs)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors())
        raise ValueError(f"invalid {what} options: {problems}") from None


def sft_spec_from_kwargs(**kwargs: Any) -> SFTSpec:
    """Validate `Backend.train_sft` keyword arguments, with an error that names the bad option and the fix."""
    return _spec_from_kwargs(SFTSpec, "SFT", kwargs)


def prepare_sft_trajectories(
    trajectories: Iterable[Trajectory], spec: SFTSpec
) -> tuple[Iterable[Trajectory], int | None]:
    """Check SFT input before any model work; returns the trajectories and the number of batches (None
    when it is not known in advance: a stream with batch_size="auto").

    A list is checked whole: not empty, every trajectory valid (unless `spec.skip_invalid`; the service
    checks again as it trains), one learning rate per batch. A stream (any other iterable) is not read
    ahead beyond its first item, which must exist; the service checks the rest as it reads it.
    """
    rates = spec.learning_rate
    if isinstance(rates, list) and spec.batch_size == "auto":
        raise ValueError(
            f'learning_rate is a list of {len(rates)} values (one per batch), but batch_size="auto" makes '
            "the number of batches depend on token counts; pass an integer batch_size with a list, or a "
            "single float learning_rate"
        )
    if isinstance(trajectories, Sequence):
        if not trajectories:
            raise ValueError(
                "train_sft() got an empty list of trajectories; pass at least one art.Trajectory that ends "
                "with the assistant turn to learn"
            )
        for i, trajectory in enumerate(trajectories):
            if not isinstance(trajectory, Trajectory):
                raise TypeError(
                    f"trajectories[{i}] is a {type(trajectory).__name__}; train_sft takes art.Trajectory objects"
                )
            if spec.skip_invalid:
                continue
            try:
                trajectory.validate_for_sft()
            except ValueError as e:
                raise ValueError(f"{describe_source(trajectory, i)}: {e}; {SFT_SKIP_HINT}") from None
        if not isinstance(spec.batch_size, int):
            return trajectories, None
        batches = math.ceil(len(trajectories) / spec.batch_size)
        if isinstance(rates, list) and len(rates) != batches:
            raise ValueError(
                f"learning_rate has {len(rates)} values but {len(trajectories)} trajectories make {batches} "
                f"batches of batch_size={spec.batch_size}; give exactly one learning rate per batch"
            )
        return trajectories, batches
    iterator = iter(trajectories)
    first = next(iterator, None)
    if first is None:
        raise ValueError(
            "train_sft() got no trajectories (the iterable was empty); pass at least one art.Trajectory "
            "that ends with the assistant turn to learn"
        )
    return itertools.chain([first], iterator), len(rates) if isinstance(rates, list) else None


def describe_group(index: int, group: TrajectoryGroup) -> str:
    """A short name for a group in messages: its index and metadata, if any."""
    meta = f" (metadata {group.metadata})" if group.metadata else ""
    return f"group {index}{meta}"


class RefusesSFT:
    """A backend that takes no supervised fine-tuning: its `train_sft` raises NotImplementedError with
    `SFT_REFUSAL` (formatted with the model's `project` and `name`), which says where fine-tuning works.
    Put it before `Backend` among the bases."""

    SFT_REFUSAL: ClassVar[str]

    async def train_sft(
        self, model: TrainableModel, trajectories: Iterable[Trajectory], **_: Any
    ) -> TrainSFTResult:
        """Not served here: raises NotImplementedError naming the way to fine-tune (`SFT_REFUSAL`)."""
        raise NotImplementedError(self.SFT_REFUSAL.format(project=model.project, name=model.name))


class StepWaits:
    """What a step waits for besides training (which has its progress bar), each said if it lasts
    (`art.common.waits.waiting`): its turn on a busy server, saving the checkpoint, loading it into the engine,
    and the canary that checks the engine serves what was trained. Fed by the service's step events; a context manager that closes whatever is still open."""

    _PHASES: ClassVar[dict[str, str]] = {
        "queued": "waiting its turn on the server",
        "trained": "saving its checkpoint",
        "checkpoint_saved": "loading it into the engine",
        "adapter_loaded": "checking that the engine serves what was trained (canary)",
    }

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._open: contextlib.ExitStack | None = None

    def on_event(self, kind: str, data: dict[str, Any]) -> None:
        """A step event (`ModelService.train`'s `on_event`); any thread."""
        if kind == "progress":
            if data.get("micro_batch") != data.get("total"):
                return
            kind = "trained"
        phase = self._PHASES.get(kind)
        if phase is not None:
            self._enter(f"{self.name}: {phase}")
        elif kind == "started":  # training itself shows its progress bar
            self._close()

    def _enter(self, what: str) -> None:
        with self._lock:
            self._close_locked()
            self._open = contextlib.ExitStack()
            self._open.enter_context(waiting(what))

    def _close(self) -> None:
        with self._lock:
            self._close_locked()

    def _close_locked(self) -> None:
        if self._open is not None:
            self._open.close()
            self._open = None

    def __enter__(self) -> StepWaits:
        return self

    def __exit__(self, *exc: object) -> None:
        self._close()


def prepare_groups_for_training(
    groups: Iterable[TrajectoryGroup], *, without_logprobs: bool = False
) -> list[TrajectoryGroup]:
    """Validate every trajectory (field named on error: `TrainingInputError` for a sampled token id or
    logprob the trainer cannot use, see `art.rollout.training_input`) and warn about groups with nothing to learn
    from.

    A group in which no trajectory has a trainable turn is named, with what is missing and how to fix it
    (with `without_logprobs`, `allow_training_without_logprobs=True`, any assistant turn is trainable).
    Such groups are kept (the trainer counts and reports them); nothing here drops data.
    """
    group_list = list(groups)
    for gi, group in enumerate(group_list):
        if not isinstance(group, TrajectoryGroup):
            raise TypeError(
                f"trajectory_groups[{gi}] is a {type(group).__name__}, expected art.TrajectoryGroup"
            )
        for ti, trajectory in enumerate(group.trajectories):
            try:
                trajectory.validate_for_record()
            except ValueError as e:
                raise ValueError(f"{describe_group(gi, group)}, trajectory {ti}: {e}") from None
    check_training_groups(group_list)  # sampled token ids and logprobs the trainer can use as they are
    for gi, group in enumerate(group_list):
        trainable = (t.num_trainable_turns(without_logprobs=without_logprobs) for t in group.trajectories)
        if group.trajectories and not any(trainable):
            warnings.warn(
                f"{describe_group(gi, group)} has no trainable turn: none of its {len(group.trajectories)} "
                "trajectories holds an OpenAI Choice with logprobs. Append `response.choices[0]` (not "
                "`.message`) to `messages_and_choices`, and keep logprobs on (ART's server always returns "
                "them; other servers need `logprobs=True`).",
                stacklevel=3,
            )
    return group_list
