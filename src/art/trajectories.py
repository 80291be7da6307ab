"""Trajectories, histories and groups: what a rollout produces and what training consumes.

A trajectory's `messages_and_choices` mixes plain message dicts (context: system, user, tool results,
assistant turns written by hand) and OpenAI `Choice` objects returned by the engine. A `Choice` that carries
logprobs is a *trainable* turn; its exact sampled token ids ride along as `choice.token_ids`.

Everything here serialises losslessly to JSON (`Trajectory.model_dump(mode="json")` and back with
`Trajectory.model_validate`), which is how `storage` keeps the record on disk.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import copy
import datetime
import math
import time
import traceback as traceback_module
from collections.abc import AsyncIterator, Awaitable, Generator, Iterable, Iterator, Sequence
from typing import Annotated, Any, Protocol, TypeAlias

from openai.types.chat import ChatCompletionMessageParam
from openai.types.chat.chat_completion import Choice
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr, field_validator

from art.common.readable import ReadableModel

Message: TypeAlias = dict[str, Any]
Messages: TypeAlias = list[Message]
ChatMessages: TypeAlias = list[ChatCompletionMessageParam]
"""What `messages()` returns: the same dicts, typed as the `openai` client's `messages=` parameter."""
Tools: TypeAlias = list[dict[str, Any]]
MetadataValue: TypeAlias = float | int | str | bool | None
MetricValue: TypeAlias = float | int | bool

KNOWN_ROLES = ("system", "developer", "user", "assistant", "tool", "function")


def _to_message_or_choice(item: Any) -> Any:
    """A dict that looks like a serialised Choice (it has `message` and `finish_reason`) becomes a Choice."""
    if isinstance(item, dict) and "message" in item and "finish_reason" in item and "role" not in item:
        return Choice.model_validate(item)
    return item


MessageOrChoice: TypeAlias = Annotated[Choice | Message, BeforeValidator(_to_message_or_choice)]
MessagesAndChoices: TypeAlias = list[MessageOrChoice]


def choice_to_message(choice: Choice) -> Message:
    """The assistant message of a Choice as a plain dict, ready to send back to a chat API."""
    message = choice.message.model_dump(mode="json", exclude_none=True)
    message.setdefault("content", None)
    for key in ("refusal", "annotations", "audio", "function_call"):
        if not message.get(key):
            message.pop(key, None)
    return message


def get_messages(messages_and_choices: Iterable[Any]) -> ChatMessages:
    """Plain copies of the messages, each Choice as its assistant message, and no `content` left None (the
    reference's helper: chat templates want a string). `Trajectory.messages()` keeps None as it was.

    Example:
        >>> get_messages([{"role": "assistant", "content": None, "tool_calls": []}])
        [{'role': 'assistant', 'content': '', 'tool_calls': []}]
    """
    plain: list[Any] = []
    for item in messages_and_choices:
        message = dict(choice_to_message(item) if isinstance(item, Choice) else item)
        if message.get("content") is None:
            message["content"] = ""
        plain.append(message)
    return plain


def is_trainable_choice(item: Any) -> bool:
    """Whether an item of `messages_and_choices` is a sampled turn that training can learn from."""
    return isinstance(item, Choice) and item.logprobs is not None and bool(item.logprobs.content)


def is_trainable_turn(item: Any, *, without_logprobs: bool = False) -> bool:
    """`is_trainable_choice`, or with `without_logprobs` any assistant turn (a Choice, or a message dict
    with role "assistant"): what training learns from under `allow_training_without_logprobs=True`."""
    if not without_logprobs:
        return is_trainable_choice(item)
    return isinstance(item, Choice) or (isinstance(item, dict) and item.get("role") == "assistant")


def validate_messages_and_choices(items: Iterable[Any], field: str = "messages_and_choices") -> None:
    """Refuse unknown roles and tool calls whose arguments are not a string, naming the field.

    Arguments that are a string but not JSON (a model's malformed call) are kept as they are, as the
    reference keeps them: the call is part of what the model did, and training renders it as written."""
    for i, item in enumerate(items):
        where = f"{field}[{i}]"
        if isinstance(item, Choice):
            message: Any = choice_to_message(item)
        elif isinstance(item, dict):
            message = item
        else:
            raise ValueError(
                f"{where}: expected a message dict or an OpenAI Choice, got {type(item).__name__}"
            )
        role = message.get("role")
        if role not in KNOWN_ROLES:
            raise ValueError(f"{where}.role: unknown role {role!r}; use one of {', '.join(KNOWN_ROLES)}")
        for j, call in enumerate(message.get("tool_calls") or []):
            function = call.get("function") if isinstance(call, dict) else None
            arguments = function.get("arguments") if isinstance(function, dict) else None
            field_name = f"{where}.tool_calls[{j}].function.arguments"
            if not isinstance(arguments, str):
                raise ValueError(
                    f"{field_name}: must be a JSON string (got {type(arguments).__name__}); "
                    "use json.dumps(arguments)"
                )


def validate_sft_messages(items: Sequence[Any], field: str = "messages_and_choices") -> None:
    """Check a conversation for supervised fine-tuning: valid messages (see
    `validate_messages_and_choices`) ending with the assistant turn to learn. Raises ValueError naming the
    field and the fix."""
    validate_messages_and_choices(items, field)
    if not items:
        raise ValueError(f"{field} is empty; an SFT example needs at least the assistant turn to learn")
    last = items[-1]
    role = "assistant" if isinstance(last, Choice) else last.get("role")
    if role != "assistant":
        raise ValueError(
            f"{field}[{len(items) - 1}].role is {role!r}: an SFT conversation must end with the assistant "
            f"turn to learn; end it with an assistant message (or remove the trailing {role} turn)"
        )


# Metadata of a trajectory read from a file (`art.utils.sft.iterate_file`), so errors can name the line.
SOURCE_FILE, SOURCE_LINE = "source_file", "source_line"
SFT_SKIP_HINT = "or pass skip_invalid=True (`art sft --skip-invalid`) to skip (and count) such conversations"


def describe_source(trajectory: Trajectory, index: int) -> str:
    """Where a trajectory came from, for messages: `data.jsonl, line 12` when read from a file, else
    `trajectories[3]` (its index in what was passed)."""
    source_file, line = trajectory.metadata.get(SOURCE_FILE), trajectory.metadata.get(SOURCE_LINE)
    if source_file is not None and line is not None:
        return f"{source_file}, line {line}"
    return f"trajectories[{index}]"


def _check_reward(value: float) -> float:
    if not math.isfinite(value):
        raise ValueError(f"reward must be a finite number, got {value!r}")
    return value


class History(ReadableModel):
    """A conversation that belongs to a trajectory but is not its main thread (e.g. a sub-agent's).

    Example:
        >>> sub = art.History(messages_and_choices=[{"role": "user", "content": "Summarise the page."}])
        >>> art.Trajectory(additional_histories=[sub]).additional_histories[0].messages()[0]["role"]
        'user'
    """

    messages_and_choices: MessagesAndChoices
    tools: Tools | None = None

    def messages(self) -> ChatMessages:
        """Plain messages: every Choice replaced by its assistant message (typed for the `openai` client)."""
        plain = [choice_to_message(m) if isinstance(m, Choice) else m for m in self.messages_and_choices]
        return plain  # type: ignore[return-value]  # plain dicts; the TypedDicts are only their static type


class Trajectory(ReadableModel):
    """One rollout: the conversation, the tools the agent had, and the reward it earned.

    Example:
        >>> t = art.Trajectory(messages_and_choices=[{"role": "user", "content": "2 + 2?"},
        ...                                          {"role": "assistant", "content": "4"}], reward=1.0)
        >>> (t.reward, t.messages()[-1]["content"])
        (1.0, '4')
    """

    model_config = ConfigDict(validate_assignment=True)

    messages_and_choices: MessagesAndChoices = Field(default_factory=list)
    tools: Tools | None = None
    additional_histories: list[History] = Field(default_factory=list)
    reward: float = 0.0
    metrics: dict[str, MetricValue] = Field(default_factory=dict)
    metadata: dict[str, MetadataValue] = Field(default_factory=dict)
    logs: list[str] = Field(default_factory=list)
    initial_policy_version: int | None = Field(
        default=None, description="The step whose policy began this rollout (set by PipelineTrainer)."
    )
    final_policy_version: int | None = Field(
        default=None, description="The newest step when this rollout ended (set by PipelineTrainer)."
    )

    _started: float = PrivateAttr(default_factory=time.monotonic)  # for finish(); not part of equality
    _start_time: datetime.datetime = PrivateAttr(default_factory=datetime.datetime.now)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Trajectory):
            return NotImplemented
        return type(self) is type(other) and self.__dict__ == other.__dict__

    @field_validator("reward")
    @classmethod
    def _finite_reward(cls, value: float) -> float:
        return _check_reward(value)

    @field_validator("messages_and_choices")
    @classmethod
    def _valid_messages(cls, value: list[Any]) -> list[Any]:
        validate_messages_and_choices(value)
        return value

    def messages(self) -> ChatMessages:
        """Plain messages: every Choice replaced by its assistant message (typed for the `openai` client)."""
        plain = [choice_to_message(m) if isinstance(m, Choice) else m for m in self.messages_and_choices]
        return plain  # type: ignore[return-value]  # plain dicts; the TypedDicts are only their static type

    def log(self, message: str) -> None:
        """Append a line to this trajectory's logs (kept on disk with it)."""
        self.logs.append(message)

    @property
    def start_time(self) -> datetime.datetime:
        """When this trajectory was created (local time; not saved with it, as in the reference)."""
        return self._start_time

    def for_logging(self) -> dict[str, Any]:
        """A plain dict to print or dump as YAML/JSON: reward, metrics, metadata, tools, logs, and every
        message as a dict with `"trainable"` saying whether it was a sampled turn (a Choice).

        Additional histories, when there are any, come under `"additional_histories"` the same way.

        Example:
            >>> t = art.Trajectory(messages_and_choices=[{"role": "user", "content": "hi"}], reward=0.5)
            >>> t.for_logging()["messages"]
            [{'role': 'user', 'content': 'hi', 'trainable': False}]
        """

        def loggable(items: list[Any]) -> list[dict[str, Any]]:
            return [
                {**choice_to_message(item), "trainable": True}
                if isinstance(item, Choice)
                else {**item, "trainable": False}
                for item in items
            ]

        logged: dict[str, Any] = {
            "reward": self.reward,
            "metrics": self.metrics,
            "metadata": self.metadata,
            "messages": loggable(self.messages_and_choices),
            "tools": self.tools,
            "logs": self.logs,
        }
        if self.additional_histories:
            logged["additional_histories"] = [
                {"messages": loggable(h.messages_and_choices), "tools": h.tools}
                for h in self.additional_histories
            ]
        return logged

    def finish(self) -> Trajectory:
        """Record the seconds since this trajectory was created as `metrics["duration"]`; returns it."""
        self.metrics["duration"] = time.monotonic() - self._started
        return self

    @contextlib.asynccontextmanager
    async def track_duration(self, metric_name: str) -> AsyncIterator[None]:
        """Add the seconds spent inside the block to `metrics[f"{metric_name}_duration"]`.

        async with traj.track_duration("tool"):
            result = await call_tool(...)
        """
        start = time.monotonic()
        try:
            yield
        finally:
            key = f"{metric_name}_duration"
            self.metrics[key] = float(self.metrics.get(key, 0.0)) + time.monotonic() - start

    def num_trainable_turns(self, *, without_logprobs: bool = False) -> int:
        """How many turns (here and in additional histories) are Choices with logprobs; with
        `without_logprobs`, every assistant turn (the reference's `allow_training_without_logprobs`)."""
        items = [*self.messages_and_choices]
        for history in self.additional_histories:
            items.extend(history.messages_and_choices)
        return sum(1 for item in items if is_trainable_turn(item, without_logprobs=without_logprobs))

    def validate_for_record(self) -> None:
        """Check what may have changed since construction (lists appended to, values set in place).

        Raises ValueError naming the field: a non-finite reward, an unknown role, or tool-call arguments
        that are not a string (a string that is not JSON is kept, as the reference keeps it).
        """
        _check_reward(self.reward)
        validate_messages_and_choices(self.messages_and_choices)
        for k, history in enumerate(self.additional_histories):
            validate_messages_and_choices(history.messages_and_choices, f"additional_histories[{k}]")

    def validate_for_sft(self) -> None:
        """Check that this trajectory is a supervised example: valid messages ending with an assistant turn
        (additional histories: valid messages). Raises ValueError naming the field and the fix."""
        validate_sft_messages(self.messages_and_choices)
        for k, history in enumerate(self.additional_histories):
            validate_messages_and_choices(history.messages_and_choices, f"additional_histories[{k}]")


class RolloutObserver(Protocol):
    """Told about every finished rollout of an awaited group (`gather` uses it for progress and budgets)."""

    def record_trajectory(self, trajectory: Trajectory) -> None: ...

    def record_exception(self, exc: BaseException) -> None: ...


rollout_observer: contextvars.ContextVar[RolloutObserver | None] = contextvars.ContextVar(
    "art_rollout_observer", default=None
)


class PydanticException(BaseModel):
    """A rollout's exception, kept with its group in a form that serialises.

    Example:
        >>> art.PydanticException.from_exception(TimeoutError("tool timed out")).type
        'TimeoutError'
    """

    type: str
    message: str
    traceback: str

    @classmethod
    def from_exception(cls, exc: BaseException) -> PydanticException:
        """Capture type, message and formatted traceback of `exc`."""
        return cls(
            type=type(exc).__name__,
            message=str(exc),
            traceback="".join(traceback_module.format_exception(type(exc), exc, exc.__traceback__)),
        )


class TrajectoryGroup(ReadableModel):
    """Trajectories of the same scenario, compared with each other to compute advantages.

    Build it from finished trajectories, or from awaitables (rollout coroutines): then the group itself is
    awaitable, runs them concurrently and collects each rollout's exception instead of failing the group.
    `gather_trajectory_groups` decides when too many rollouts failed.

    Example:
        >>> group = art.TrajectoryGroup([art.Trajectory(reward=1.0), art.Trajectory(reward=0.0)])
        >>> [t.reward for t in group.trajectories]
        [1.0, 0.0]

        From rollouts (the group is awaited, e.g. by `gather_trajectory_groups`):

            art.TrajectoryGroup(rollout(model, scenario) for _ in range(8))
    """

    trajectories: list[Trajectory]
    exceptions: list[PydanticException] = Field(default_factory=list)
    metadata: dict[str, MetadataValue] = Field(default_factory=dict)
    metrics: dict[str, MetricValue] = Field(default_factory=dict)
    logs: list[str] = Field(default_factory=list)

    _awaitables: list[Awaitable[Trajectory]] = PrivateAttr(default_factory=list)

    def __init__(
        self,
        trajectories: Iterable[Trajectory | BaseException] | Iterable[Awaitable[Trajectory]] = (),
        *,
        exceptions: Iterable[BaseException | PydanticException | dict[str, Any]] = (),
        metadata: dict[str, MetadataValue] | None = None,
        metrics: dict[str, MetricValue] | None = None,
        logs: list[str] | None = None,
    ) -> None:
        done: list[Trajectory] = []
        pending: list[Awaitable[Trajectory]] = []
        # pydantic's model_validate also comes through here, with serialised dicts.
        errors = [
            e
            if isinstance(e, PydanticException)
            else PydanticException.model_validate(e)
            if isinstance(e, dict)
            else PydanticException.from_exception(e)
            for e in exceptions
        ]
        for i, item in enumerate(trajectories):
            if isinstance(item, Trajectory):
                done.append(item)
            elif isinstance(item, dict):
                done.append(Trajectory.model_validate(item))
            elif isinstance(item, BaseException):
                errors.append(PydanticException.from_exception(item))
            elif isinstance(item, Awaitable):
                pending.append(item)
            else:
                raise TypeError(
                    f"TrajectoryGroup trajectories[{i}]: expected a Trajectory or an awaitable of one "
                    f"(a rollout coroutine), got {type(item).__name__}"
                )
        super().__init__(
            trajectories=done,
            exceptions=errors,
            metadata=metadata or {},
            metrics=metrics or {},
            logs=logs or [],
        )
        self._awaitables = pending

    def __iter__(self) -> Iterator[Trajectory]:  # type: ignore[override]
        return iter(self.trajectories)

    def log(self, message: str) -> None:
        """Append a line to this group's logs (kept on disk with it)."""
        self.logs.append(message)

    def __copy__(self) -> TrajectoryGroup:
        """`copy.copy(group)`: new lists and dicts (appending to one group leaves the other alone), the
        same Trajectory objects (the reference's semantics)."""
        new = TrajectoryGroup(
            self.trajectories[:],
            exceptions=self.exceptions[:],
            metadata=dict(self.metadata),
            metrics=dict(self.metrics),
            logs=self.logs[:],
        )
        new._awaitables = self._awaitables[:]
        return new

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> TrajectoryGroup:
        """`copy.deepcopy(group)`: everything copied, trajectories included."""
        memo = {} if memo is None else memo
        if id(self) in memo:
            return memo[id(self)]  # type: ignore[no-any-return]
        new = TrajectoryGroup(
            copy.deepcopy(self.trajectories, memo),
            exceptions=copy.deepcopy(self.exceptions, memo),
            metadata=copy.deepcopy(self.metadata, memo),
            metrics=copy.deepcopy(self.metrics, memo),
            logs=self.logs[:],
        )
        memo[id(self)] = new
        return new

    def __len__(self) -> int:
        return len(self.trajectories)

    @property
    def num_pending(self) -> int:
        """Rollouts not yet awaited (0 for a group built from finished trajectories)."""
        return len(self._awaitables)

    def __await__(self) -> Generator[Any, None, TrajectoryGroup]:
        return self._run().__await__()

    async def _run(self) -> TrajectoryGroup:
        context = rollout_observer.get()
        pending, self._awaitables = self._awaitables, []

        async def one(awaitable: Awaitable[Trajectory]) -> Trajectory | BaseException:
            try:
                result = await awaitable
            except Exception as exc:  # a failed rollout is data, not a crash (up to max_exceptions)
                if context is not None:
                    context.record_exception(exc)
                return exc
            if not isinstance(result, Trajectory):
                exc = TypeError(f"a rollout returned {type(result).__name__}, expected art.Trajectory")
                if context is not None:
                    context.record_exception(exc)
                return exc
            if context is not None:
                context.record_trajectory(result)
            return result

        results = await asyncio.gather(*(one(a) for a in pending))
        for result in results:
            if isinstance(result, Trajectory):
                self.trajectories.append(result)
            else:
                self.exceptions.append(PydanticException.from_exception(result))
        return self
