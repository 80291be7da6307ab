"""Langfuse: one trace per logged trajectory, scored with its reward.

With "langfuse" in `report_metrics`, every trajectory passed to `Model.log` (so every rollout that
`model.train` trains on) becomes a Langfuse trace named `"{model} {split} rollout"`, tagged with the
split, the step and the model, whose single observation holds the conversation (`input`: messages and
tools; `output`: the final assistant message) and the trajectory's metrics and metadata; a score "reward" is
attached to the trace. Every trace of a model carries the same Langfuse session, kept in the model's record
(`trackers.json`, key "langfuse"), so a resumed model's traces continue its session. The client is
Langfuse's own (`langfuse.get_client()`), configured as usual by
`LANGFUSE_PUBLIC_KEY`, `LANGFUSE_SECRET_KEY` and `LANGFUSE_BASE_URL`; traces are flushed at each
logged step.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from art.integrations.tracked import TrackedModel
    from art.trajectories import Trajectory, TrajectoryGroup


def on_register(model: TrackedModel) -> None:
    """Nothing to do: traces are sent when trajectories are logged."""


def session_id(model: TrackedModel) -> str:
    """The Langfuse session of `model`'s traces, from its record (chosen and stored on first use)."""
    stored = model.storage.read_tracker("langfuse").get("session_id")
    if isinstance(stored, str) and stored:
        return stored
    chosen = f"{model.project}/{model.name}-{secrets.token_hex(4)}"
    model.storage.write_tracker("langfuse", {"session_id": chosen})
    return chosen


def _observation(trajectory: Trajectory, split: str, step: int, group: int) -> dict[str, Any]:
    messages = trajectory.messages()
    # The last assistant turn is the rollout's output; the conversation before it is the input.
    answered = bool(messages) and messages[-1].get("role") == "assistant"
    return {
        "input": {"messages": messages[:-1] if answered else messages, "tools": trajectory.tools},
        "output": messages[-1] if answered else None,
        "metadata": {
            "split": split,
            "step": step,
            "group": group,
            "reward": trajectory.reward,
            "metrics": trajectory.metrics,
            "metadata": trajectory.metadata,
            "additional_histories": len(trajectory.additional_histories),
        },
    }


def on_log(
    model: TrackedModel, split: str, step: int, row: dict[str, float], groups: Sequence[TrajectoryGroup]
) -> None:
    """Send each trajectory of the logged groups as a trace with a "reward" score, then flush."""
    if not any(group.trajectories for group in groups):
        return
    from langfuse import get_client, propagate_attributes

    client = get_client()
    tags = [split, f"step:{step}", f"model:{model.project}/{model.name}"]
    session = session_id(model)
    for gi, group in enumerate(groups):
        for trajectory in group.trajectories:
            with propagate_attributes(
                trace_name=f"{model.name} {split} rollout", tags=tags, session_id=session
            ):
                span = client.start_observation(
                    name="rollout", as_type="agent", **_observation(trajectory, split, step, gi)
                )
                span.score_trace(name="reward", value=trajectory.reward)
                span.end()
    client.flush()
