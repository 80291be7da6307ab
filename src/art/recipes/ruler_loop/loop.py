"""RULER-scored GRPO with validation against the base model: the loop MCP-RL and AutoRL share.

Each step: `rollouts_per_group` rollouts of each of `groups_per_step` training inputs, every group
scored by RULER (`ruler_score_group`; a group the judge cannot score is dropped and the step says so),
one GRPO step on what remains. Validation puts the trained model and the base model side by side: for
every held-out input, `val_rollouts` rollouts of each go into ONE group that the judge scores together,
so the scores compare like with like (RULER is relative within a group). Reported per evaluation: the
trained model's mean score (`val/reward`), the base model's (`val/base_reward`) and the share of inputs
on which the trained model scored higher (`val/win_rate`, ties count half), and the mean of each
numeric trajectory metric of both models (`Comparison.signals`: label-free measures such as an MCP
rollout's `tool_errors`, which say something even when the judge does not). Everything is logged as
`art demo` logs it (history.jsonl, trajectories per split, a PNG plot).

`RulerTrainingConfig.shaping` adds a label-free bonus to each training trajectory's judge score (the
MCP-RL example rewards finished tasks and valid tool calls this way): with a judge that scores a whole
group alike, such as a small model judging itself, the bonus still ranks the group, so GRPO has
something to learn from. Validation scores stay the judge's alone.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

from art.model import Backend, Model, TrainableModel
from art.recipes.ruler_loop.endpoints import is_self
from art.rewards.judge import JudgeLike, resolve_judges
from art.rewards.reward import Reward, RulerReward, as_reward
from art.rewards.ruler import DEFAULT_RUBRIC
from art.rollout.gather import gather_trajectory_groups
from art.trajectories import Trajectory, TrajectoryGroup
from art.types import RULER_LOOP_LEARNING_RATE, TrainConfig
from art.utils.iterate_dataset import iterate_dataset

T = TypeVar("T")
RolloutFn = Callable[[Model, T], Awaitable[Trajectory]]
"""`rollout(model, item)`: one episode by `model` (the trained model, or the base model's view)."""

TRAINED, BASE = "trained", "base"


@dataclass
class RulerTrainingConfig:
    """Hyper-parameters of the loop (defaults in one place)."""

    steps: int = 8
    groups_per_step: int = 2
    rollouts_per_group: int = 4
    learning_rate: float = RULER_LOOP_LEARNING_RATE
    eval_every: int = 0  # evaluate every N steps as well as at the end; 0: at the end only
    val_rollouts: int = 1  # rollouts per held-out input, per model
    max_exceptions: float = 0.25  # failed rollouts tolerated per gather (a fraction, or a count >= 1)
    seed: int = 0
    rubric: str = DEFAULT_RUBRIC
    # A label-free bonus added to each training trajectory's judge score (kept in
    # metrics["shaping_bonus"]): a Reward (art.rewards, e.g. `0.2 * art.mcp.tool_use_signal`) or a plain
    # function of one trajectory; None: the judge's score alone.
    shaping: Reward | Callable[[Trajectory], float] | None = None

    def __post_init__(self) -> None:
        for name in ("steps", "groups_per_step", "val_rollouts"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.rollouts_per_group < 2:
            raise ValueError("rollouts_per_group must be >= 2: RULER compares rollouts with each other")
        if self.eval_every < 0:
            raise ValueError("eval_every must be >= 0 (0: evaluate at the end only)")


@dataclass
class Comparison:
    """The trained model against the base model on the held-out inputs, judged side by side."""

    step: int
    inputs: int  # held-out inputs tried
    judged: int  # of which the judge scored both models
    trained_score: float
    base_score: float
    win_rate: float  # share of judged inputs where the trained model scored higher (ties: half)
    # Mean of every numeric trajectory metric both models reported: name -> (trained, base).
    signals: dict[str, tuple[float, float]] = field(default_factory=dict)


@dataclass
class RulerTrainingResult(Generic[T]):
    """What a run produced: comparisons, steps, where the record is, and how long it took."""

    final_step: int
    steps_trained: int
    steps_skipped: int  # steps in which the judge scored no group
    comparisons: list[Comparison]
    judge: str
    weak_judge: bool
    history_path: Path
    plot_path: Path | None
    seconds: float
    notes: list[str] = field(default_factory=list)

    @property
    def final(self) -> Comparison | None:
        """The last comparison (None when there was none)."""
        return self.comparisons[-1] if self.comparisons else None


@asynccontextmanager
async def serving(
    model: TrainableModel, backend: Backend | None, echo: Callable[[str], None] = print
) -> AsyncIterator[Backend]:
    """`model` registered with `backend` (a new `LocalBackend` when None, closed on exit)."""
    own = backend is None
    if backend is None:
        from art.backends.local import LocalBackend

        backend = LocalBackend()
    try:
        echo(f"Loading {model.base_model} and starting its server...")
        await model.register(backend)
        yield backend
    finally:
        if own:
            await backend.close()


def base_model_view(model: TrainableModel) -> Model:
    """The base model (no adapter) on the trained model's own server, for side-by-side validation."""
    if model.inference_base_url is None:
        raise RuntimeError(
            f"model {model.name!r} is not registered: call `await model.register(backend)` first"
        )
    return Model(
        name=f"{model.name}-base",
        project=model.project,
        base_path=model.base_path,
        inference_base_url=model.inference_base_url,
        inference_api_key=model.inference_api_key,
        inference_model_name=model.base_model,
    )


def _tagged(rollout: RolloutFn[T], model: Model, item: T, policy: str) -> Awaitable[Trajectory]:
    async def run() -> Trajectory:
        trajectory = await rollout(model, item)
        trajectory.metadata["policy"] = policy
        return trajectory

    return run()


def _mean(values: Sequence[float]) -> float:
    return statistics.fmean(values) if values else math.nan


def _metric_means(groups: Sequence[TrajectoryGroup]) -> dict[str, float]:
    """Mean of each numeric (or boolean) trajectory metric over every trajectory that reports it."""
    values: dict[str, list[float]] = {}
    for group in groups:
        for trajectory in group.trajectories:
            for name, value in trajectory.metrics.items():
                if isinstance(value, bool | int | float):
                    values.setdefault(name, []).append(float(value))
    return {name: _mean(v) for name, v in values.items()}


def loop_reward(judge: JudgeLike, config: RulerTrainingConfig, *, shaped: bool) -> Reward:
    """The loop's reward: RULER's scores (a group it cannot score is dropped), plus `config.shaping`'s
    bonus (kept in `metrics["shaping_bonus"]`) when `shaped` (training rollouts; held-out ones are judged
    by RULER alone)."""
    ruler = RulerReward(judge, config.rubric, swallow_exceptions=True)
    if not shaped or config.shaping is None:
        return ruler
    return ruler + as_reward(config.shaping).recorded_as("shaping_bonus")


async def compare_with_base(
    model: TrainableModel,
    items: Sequence[T],
    rollout: RolloutFn[T],
    judge: JudgeLike,
    config: RulerTrainingConfig,
    *,
    step: int,
    log: bool = True,
) -> Comparison:
    """Judge the trained model (its newest step) and the base model side by side on `items`; log both."""
    base = base_model_view(model)
    groups = await gather_trajectory_groups(
        (
            TrajectoryGroup(
                [
                    *(_tagged(rollout, model, item, TRAINED) for _ in range(config.val_rollouts)),
                    *(_tagged(rollout, base, item, BASE) for _ in range(config.val_rollouts)),
                ]
            )
            for item in items
        ),
        pbar_desc=f"step {step}: trained vs base, held-out",
        max_exceptions=config.max_exceptions,
        after_each=loop_reward(judge, config, shaped=False).score_group,
    )
    trained_groups: list[TrajectoryGroup] = []
    base_groups: list[TrajectoryGroup] = []
    wins: list[float] = []
    for group in groups:
        mine = [t for t in group.trajectories if t.metadata.get("policy") == TRAINED]
        theirs = [t for t in group.trajectories if t.metadata.get("policy") == BASE]
        if not mine or not theirs:
            continue
        trained_groups.append(TrajectoryGroup(mine, exceptions=group.exceptions))
        base_groups.append(TrajectoryGroup(theirs))
        a, b = _mean([t.reward for t in mine]), _mean([t.reward for t in theirs])
        wins.append(1.0 if a > b else 0.5 if a == b else 0.0)
    comparison = Comparison(
        step=step,
        inputs=len(items),
        judged=len(wins),
        trained_score=_mean([t.reward for g in trained_groups for t in g.trajectories]),
        base_score=_mean([t.reward for g in base_groups for t in g.trajectories]),
        win_rate=_mean(wins),
    )
    trained_signals, base_signals = _metric_means(trained_groups), _metric_means(base_groups)
    comparison.signals = {
        name: (trained_signals[name], base_signals[name]) for name in trained_signals if name in base_signals
    }
    if log and trained_groups:
        await model.log(
            trained_groups,
            split="val",
            step=step,
            metrics={
                "val/base_reward": comparison.base_score,
                "val/win_rate": comparison.win_rate,
                "val/judged_inputs": float(comparison.judged),
            },
        )
        await model.log(base_groups, split="val_base", step=step)
    return comparison


def format_comparison(c: Comparison) -> str:
    """One line: scores of both models and the win rate, or why there is none."""
    if not c.judged:
        return f"step {c.step}: the judge scored none of the {c.inputs} held-out inputs"
    return (
        f"step {c.step}: trained {c.trained_score:.3f}  base {c.base_score:.3f}  trained better on "
        f"{c.win_rate:.0%} of {c.judged} held-out inputs"
    )


def _plot_rewards(model: TrainableModel, title: str) -> Path | None:
    """The model's rewards by step (train, validation, base, win rate) drawn to `plots/reward.png` in its
    record; None when nothing was logged (e.g. the judge scored nothing)."""
    from art.record.plots import plot_history

    plot_path = model.storage.root / "plots" / "reward.png"
    try:
        plot_history(
            model.history(),
            plot_path,
            metrics=("train/reward", "val/reward", "val/base_reward", "val/win_rate"),
            title=title,
        )
    except ValueError:
        return None
    return plot_path


async def train_with_ruler(
    model: TrainableModel,
    train_items: Sequence[T],
    val_items: Sequence[T],
    rollout: RolloutFn[T],
    judge: JudgeLike,
    config: RulerTrainingConfig,
    *,
    echo: Callable[[str], None] = print,
    title: str = "",
) -> RulerTrainingResult[T]:
    """Train `model` (registered) for `config.steps` steps on `train_items`, judged by `judge`; compare
    with the base model on `val_items`; write history and plot. See the module docstring."""
    if not train_items:
        raise ValueError("no training inputs")
    if not val_items:
        raise ValueError("no held-out inputs to validate on")
    started = time.perf_counter()
    label = ", ".join(j.label for j in resolve_judges(judge))
    weak = any(is_self(j) for j in resolve_judges(judge))
    notes: list[str] = []
    if weak:
        notes.append(
            "the judge is the base model itself (--judge self): a plumbing run; its scores say little about quality"
        )
        echo(f"note: {notes[-1]}")
    first = await model.get_step()
    epochs = math.ceil((first + config.steps) * config.groups_per_step / len(train_items)) + 1
    comparisons: list[Comparison] = []
    trained = skipped = 0
    echo(f"{'step':>4} {'train score':>11} {'groups':>6} {'seconds':>8}")
    batches = iterate_dataset(
        list(train_items),
        config.groups_per_step,
        epochs,
        initial_step=first,
        use_tqdm=False,
        seed=config.seed,
    )
    for done, batch in enumerate(batches):
        if done >= config.steps:
            break
        t0 = time.perf_counter()
        groups = await gather_trajectory_groups(
            (
                TrajectoryGroup(rollout(model, item) for _ in range(config.rollouts_per_group))
                for item in batch.items
            ),
            pbar_desc=f"step {batch.step + 1} rollouts",
            max_exceptions=config.max_exceptions,
            after_each=loop_reward(judge, config, shaped=True).score_group,
        )
        if not groups:
            skipped += 1
            echo(f"{batch.step + 1:>4} {'-':>11} {0:>6} {time.perf_counter() - t0:>8.1f}  "
                 f"(the judge {label} scored no group: no training step)")  # fmt: skip
            continue
        result = await model.train(groups, config=TrainConfig(learning_rate=config.learning_rate))
        trained += 1
        score = _mean([t.reward for g in groups for t in g.trajectories])
        echo(f"{result.step:>4} {score:>11.3f} {len(groups):>6} {time.perf_counter() - t0:>8.1f}"
             + (f"  note: {result.message}" if result.message else ""))  # fmt: skip
        last = done + 1 >= config.steps
        if config.eval_every and result.step % config.eval_every == 0 and not last:
            comparisons.append(
                await compare_with_base(model, val_items, rollout, judge, config, step=result.step)
            )
            echo(format_comparison(comparisons[-1]))
    final_step = await model.get_step()
    if not comparisons or comparisons[-1].step != final_step:
        comparisons.append(await compare_with_base(model, val_items, rollout, judge, config, step=final_step))
        echo(format_comparison(comparisons[-1]))
    plot_path = _plot_rewards(model, title or model.name)
    return RulerTrainingResult(
        final_step=final_step,
        steps_trained=trained,
        steps_skipped=skipped,
        comparisons=comparisons,
        judge=label,
        weak_judge=weak,
        history_path=model.storage.history_path,
        plot_path=plot_path,
        seconds=time.perf_counter() - started,
        notes=notes,
    )
