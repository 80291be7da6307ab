"""Train an email agent: optional SFT warm-up on the scripted expert, then GRPO; the held-out table at the end.

    python -m art.examples.email_agent.train --quick                  # a small smoke run
    python -m art.examples.email_agent.train --recipe                 # the 30-minute recipe (see below)
    python -m art.examples.email_agent.train --explain 12             # one question and the expert's episode

Each RL step answers `groups_per_step` training questions `group_size` times each (a group per question),
scores them (the hand-written reward, plus RULER with `--judge`), and trains one GRPO step on the LoRA
adapter. With `--sft-warmup`, step 1 is supervised fine-tuning on `sft_questions` episodes of the
scripted expert (`rollout.expert_messages`), other training questions than RL's first ones. A time budget
(`--time-budget-minutes`) stops starting steps once the next one (as long as the longest so far) would
end past it; held-out evaluations do not count. `--recipe` (`EmailAgentConfig.recipe()`) is the measured
30-minute recipe: SFT on 384 expert episodes at 1e-3 without the worked example, then RL at 2e-5 until 30
minutes of training are spent (benchmarks/README.md, "The email agent learns"). The end is a table: the
base model and the trained adapter on the same held-out questions (another mailbox than training's):
correct answers, malformed tool calls, median tool calls per question.

`run(config, echo=print)` is the whole program (a CLI can call it); bad input raises
`EmailAgentInputError` before any model loads, and `main()` prints it in one line and exits 2.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, NoReturn

import art

from .inbox import EmailAgentInputError, Inbox, InboxConfig, Question
from .rewards import email_reward
from .rollout import SCAFFOLDS, TaskConfig, expert_messages, expert_trajectory, rollout


@dataclass
class EmailAgentConfig:
    """Everything a run needs; the defaults are the full task with RL only."""

    base_model: str = "smollm2-135m"
    project: str = "email-agent"
    name: str = "email-agent"
    base_path: str = ".art"
    seed: int = 0  # the inbox's seed; also orders the training questions
    db: str | None = None  # an inbox file written by inbox.py (None: generate one in memory)
    mailboxes: int = 6
    emails_per_mailbox: int = 500
    steps: int = 10
    group_size: int = 6
    groups_per_step: int = 4
    learning_rate: float = 1e-4
    temperature: float = 1.0  # training rollouts
    eval_temperature: float = 0.0  # held-out questions (0: greedy)
    val_questions: int = 32
    sft_warmup: bool = False
    sft_questions: int = 256  # 64 expert episodes (twice) taught the format but 3% right answers; 256: 75%
    sft_epochs: int = 1
    sft_batch_size: int = 8
    sft_learning_rate: float = 1e-3  # 3e-4 left 64 episodes' loss at 0.39 and no answer called
    time_budget_minutes: float = 0.0  # 0: no budget
    judge: str | None = None  # a LiteLLM model string, or a model name at judge_base_url
    judge_base_url: str | None = None
    evaluate_base: bool = True
    task: TaskConfig = field(default_factory=TaskConfig)

    @classmethod
    def quick(cls, **overrides: Any) -> EmailAgentConfig:
        """A smoke run: a small inbox, two small steps, a few held-out questions."""
        values: dict[str, Any] = {
            "mailboxes": 2,
            "emails_per_mailbox": 80,
            "steps": 2,
            "group_size": 3,
            "groups_per_step": 2,
            "val_questions": 4,
            "sft_questions": 8,
        }
        return cls(**{**values, **overrides})

    @classmethod
    def recipe(cls, **overrides: Any) -> EmailAgentConfig:
        """The 30-minute recipe: SFT on the expert (384 episodes at 1e-3, no worked example in the prompt:
        the fine-tuned model needs none), then RL steps at 2e-5 until 30 minutes of training are spent
        (RL at the default 1e-4 after SFT lowered held-out accuracy: benchmarks/README.md)."""
        values: dict[str, Any] = {
            "sft_warmup": True,
            "sft_questions": 384,
            "learning_rate": 2e-5,
            "steps": 1000,
            "time_budget_minutes": 30.0,
            "task": SCAFFOLDS["none"],
        }
        return cls(**{**values, **overrides})

    def validate(self) -> None:
        """Raise `EmailAgentInputError` (field and fix, one line) for a value no run can use."""
        positive = {
            "group_size": (self.group_size, 2),
            "groups_per_step": (self.groups_per_step, 1),
            "val_questions": (self.val_questions, 1),
            "sft_questions": (self.sft_questions, 1),
            "sft_epochs": (self.sft_epochs, 1),
            "sft_batch_size": (self.sft_batch_size, 1),
            "steps": (self.steps, 0),
        }
        for name, (value, least) in positive.items():
            if value < least:
                raise EmailAgentInputError(f"{name}: must be at least {least}, got {value}")
        for name in ("learning_rate", "sft_learning_rate"):
            if not getattr(self, name) > 0:
                raise EmailAgentInputError(f"{name}: must be above 0, got {getattr(self, name)}")
        if self.time_budget_minutes < 0:
            raise EmailAgentInputError(
                f"time_budget_minutes: must be 0 (none) or more, got {self.time_budget_minutes}"
            )
        if not (0 <= self.temperature <= 2 and 0 <= self.eval_temperature <= 2):
            raise EmailAgentInputError("temperature: must be from 0 to 2")
        if self.judge_base_url and not self.judge:
            raise EmailAgentInputError("judge: --judge-base-url needs --judge MODEL (the model's name there)")

    def inbox_config(self) -> InboxConfig:
        """The generated inbox's config (seed and size)."""
        return InboxConfig(
            seed=self.seed, mailboxes=self.mailboxes, emails_per_mailbox=self.emails_per_mailbox
        )


@dataclass
class EvalResult:
    """A model on the held-out questions."""

    model: str
    questions: int
    correct: float
    malformed: float  # share of tool calls that were malformed
    any_malformed: float  # share of questions with a malformed call
    median_tool_calls: float
    answered: float
    reward: float


@dataclass
class EmailAgentResult:
    """What a run produced."""

    base: EvalResult | None
    trained: EvalResult
    final_step: int
    sft_steps: int
    train_seconds: float
    seconds: float
    steps: list[dict[str, float]] = field(default_factory=list)


def summarize(model_name: str, trajectories: Sequence[art.Trajectory]) -> EvalResult:
    """Correct answers, malformed calls, median tool calls and mean reward of finished episodes."""
    n = max(len(trajectories), 1)

    def total(key: str) -> float:
        return sum(float(t.metrics.get(key, 0.0)) for t in trajectories)

    return EvalResult(
        model=model_name,
        questions=len(trajectories),
        correct=total("correct") / n,
        malformed=total("malformed_tool_calls") / max(total("tool_calls"), 1.0),
        any_malformed=total("any_malformed") / n,
        median_tool_calls=statistics.median(
            [float(t.metrics.get("tool_calls", 0)) for t in trajectories] or [0.0]
        ),
        answered=total("answered") / n,
        reward=sum(t.reward for t in trajectories) / n,
    )


TABLE_LEGEND = (
    "correct: right final answers. malformed calls: tool calls with bad JSON, an unknown tool or bad\n"
    "arguments, of all calls made (in brackets: questions with at least one). calls: median tool calls per\n"
    "question (the expert makes 3, 4 for a thread). answered: return_final_answer was called."
)


def format_table(rows: Sequence[EvalResult]) -> str:
    """A plain-text table, one row per model."""
    header = f"{'model':<28} {'questions':>9} {'correct':>8} {'malformed calls':>16} {'calls':>6} {'answered':>9} {'reward':>7}"
    lines = [header, "-" * len(header)]
    for r in rows:
        malformed = f"{r.malformed:.1%} ({r.any_malformed:.0%})"
        lines.append(
            f"{r.model:<28} {r.questions:>9} {r.correct:>8.1%} {malformed:>16} {r.median_tool_calls:>6g} "
            f"{r.answered:>9.1%} {r.reward:>7.3f}"
        )
    return "\n".join(lines)


async def evaluate(
    model: art.TrainableModel,
    model_name: str,
    inbox: Inbox,
    questions: Sequence[Question],
    config: EmailAgentConfig,
) -> tuple[EvalResult, list[art.Trajectory]]:
    """Answer every held-out question once with `model_name` (seeded sampling: reproducible)."""
    client = model.openai_client()
    groups = await art.gather_trajectory_groups(
        [
            art.TrajectoryGroup(
                [
                    rollout(
                        client,
                        model_name,
                        inbox,
                        q,
                        config=config.task,
                        temperature=config.eval_temperature,
                        sample_seed=q.id * 100,
                    )
                ]
            )
            for q in questions
        ],
        pbar_desc=f"held-out questions, {model_name}",
        pbar_leave=False,
        max_exceptions=0,
    )
    trajectories = [t for g in groups for t in g.trajectories]
    return summarize(model_name, trajectories), trajectories


def fits_budget(budget_s: float, spent_s: float, next_s: float) -> bool:
    """Whether a step of `next_s` seconds still ends within the budget (0: no budget)."""
    return not budget_s or spent_s + next_s <= budget_s


def load_inbox(config: EmailAgentConfig) -> Inbox:
    """The inbox of the run: the file `config.db`, or one generated in memory from the seed and sizes."""
    return Inbox.open(config.db) if config.db else Inbox.build(config.inbox_config())


def training_questions(inbox: Inbox, config: EmailAgentConfig) -> tuple[list[Question], list[Question]]:
    """(SFT questions, RL questions): the training split in a seeded order, SFT's taken from the end."""
    train = inbox.questions("train")
    random.Random(f"email-agent-train:{config.seed}").shuffle(train)
    needed = config.groups_per_step + (config.sft_questions if config.sft_warmup else 0)
    if len(train) < needed:
        raise EmailAgentInputError(
            f"groups_per_step: the inbox has {len(train)} training questions, a step and the SFT warm-up need "
            f"{needed}; ask for fewer or generate more emails per mailbox"
        )
    if not config.sft_warmup:
        return [], train
    return train[-config.sft_questions :], train[: -config.sft_questions]


async def sft_warmup(
    model: art.TrainableModel, inbox: Inbox, questions: Sequence[Question], config: EmailAgentConfig,
    echo: Callable[[str], None],
) -> int:  # fmt: skip
    """Supervised fine-tuning on the expert's episodes of `questions`, `sft_epochs` passes in one call."""
    trajectories = [expert_trajectory(inbox, q, config.task) for q in questions]
    rng = random.Random(f"email-agent-sft:{config.seed}")
    data: list[art.Trajectory] = []
    for _ in range(config.sft_epochs):
        data += rng.sample(trajectories, len(trajectories))
    result = await model.train_sft(
        data, art.TrainSFTConfig(learning_rate=config.sft_learning_rate, batch_size=config.sft_batch_size)
    )
    losses = [m["loss"] for m in result.batch_metrics if "loss" in m]
    if losses:
        echo(
            f"SFT on {len(questions)} expert episodes x {config.sft_epochs}: step {result.step}, loss {losses[0]:.3f} -> {losses[-1]:.3f}"
        )
    return int(result.step)


def make_judge(config: EmailAgentConfig) -> Any:
    """The RULER judge: None, a LiteLLM model string, or an `art.rewards.Judge` at `judge_base_url`."""
    if not config.judge:
        return None
    if config.judge_base_url:
        return art.rewards.Judge(model=config.judge, base_url=config.judge_base_url, api_key="none")
    return config.judge


async def run(
    config: EmailAgentConfig, *, backend: Any = None, echo: Callable[[str], None] = print
) -> EmailAgentResult:
    """Load the inbox, register the model, measure the base model, train, measure again, print the table."""
    from art.local import LocalBackend

    started = time.perf_counter()
    config.validate()
    inbox = load_inbox(config)
    val = inbox.split("val", config.val_questions, "val_questions")
    sft_questions, rl_questions = training_questions(inbox, config)
    judge = make_judge(config)
    reward = email_reward(judge) if judge is not None else None
    model = art.TrainableModel(
        name=config.name, project=config.project, base_model=config.base_model, base_path=config.base_path
    )
    own_backend = backend is None
    backend = backend or LocalBackend()
    try:
        echo(
            f"Email agent: {config.base_model} answers questions about {inbox.count()} emails in "
            f"{len(inbox.mailboxes)} mailboxes ({len(inbox.questions('train'))} training, {len(val)} held-out "
            f"questions){'; RULER judge ' + config.judge if config.judge else ''}."
        )
        t = time.perf_counter()
        await model.register(backend)
        echo(f"  model ready in {time.perf_counter() - t:.0f} s")
        base = None
        if config.evaluate_base:
            base, trajectories = await evaluate(model, config.base_model, inbox, val, config)
            if await model.get_step() == 0:
                await model.log(trajectories, split="val", step=0)
            echo(f"Held-out, base model: {base.correct:.1%} correct, {base.malformed:.1%} malformed calls")
        train_s, sft_steps, longest_s = 0.0, 0, 0.0
        budget_s = config.time_budget_minutes * 60
        if config.sft_warmup and await model.get_step() == 0:
            t = time.perf_counter()
            await sft_warmup(model, inbox, sft_questions, config, echo)
            train_s += time.perf_counter() - t
            sft_steps = 1
        steps: list[dict[str, float]] = []
        done = max(await model.get_step() - sft_steps, 0)
        if config.steps:
            echo(
                f"{'step':>4}  {'train reward':>12}  {'correct':>7}  {'malformed':>9}  {'trained on':>10}  {'seconds':>7}"
            )
        epochs = -(-config.steps * config.groups_per_step // len(rl_questions)) + 1
        for batch in art.iterate_dataset(
            rl_questions,
            groups_per_step=config.groups_per_step,
            num_epochs=epochs,
            initial_step=done,
            use_tqdm=False,
        ):
            if batch.step >= config.steps or not fits_budget(budget_s, train_s, longest_s):
                break
            t = time.perf_counter()
            name = model.get_inference_name()
            groups = await art.gather_trajectory_groups(
                (
                    art.TrajectoryGroup(
                        rollout(
                            model.openai_client(),
                            name,
                            inbox,
                            q,
                            config=config.task,
                            temperature=config.temperature,
                        )
                        for _ in range(config.group_size)
                    )
                    for q in batch.items
                ),
                pbar_desc=f"step {batch.step + 1}: rollouts",
                pbar_leave=False,
                max_exceptions=0.1,
                after_each=reward.score_group if reward is not None else None,
            )
            result = await model.train(groups, config=art.TrainConfig(learning_rate=config.learning_rate))
            took = time.perf_counter() - t
            train_s, longest_s = train_s + took, max(longest_s, took)
            flat = [t for g in groups for t in g.trajectories]
            row = summarize(name, flat)
            trainable = int(result.metrics.get("data/step_num_groups_trainable", 0))
            steps.append({"step": result.step, "reward": row.reward, "correct": row.correct, "seconds": took})
            echo(
                f"{result.step:>4}  {row.reward:>12.3f}  {row.correct:>7.1%}  {row.malformed:>9.1%}  "
                f"{f'{trainable}/{len(groups)} groups':>10}  {took:>7.1f}"
            )
        final_step = await model.get_step()
        trained, trajectories = await evaluate(
            model, model.get_inference_name(final_step), inbox, val, config
        )
        await model.log(trajectories, split="val", step=final_step)
        echo("")
        echo(f"Held-out questions ({len(val)}, the same for both):")
        echo(format_table([r for r in (base, trained) if r is not None]))
        echo(TABLE_LEGEND)
        echo(f"history: {model.storage.history_path}")
        return EmailAgentResult(
            base=base,
            trained=trained,
            final_step=final_step,
            sft_steps=sft_steps,
            train_seconds=train_s,
            seconds=time.perf_counter() - started,
            steps=steps,
        )
    finally:
        if model.inference_base_url is not None:
            await model.openai_client().close()
        if own_backend:
            await backend.close()
        inbox.close()


def explain(config: EmailAgentConfig, question_id: int, echo: Callable[[str], None] = print) -> None:
    """Print one question, its answer and sources, and the scripted expert's episode."""
    inbox = load_inbox(config)
    try:
        q = inbox.question(question_id)
        echo(f"question {q.id} ({q.split}, {q.kind}, {q.difficulty}) for {q.owner} <{q.mailbox}>: {q.text}")
        echo(f"answer: {q.answer}   sources: {list(q.source_ids)}")
        for message in expert_messages(inbox, q, replace(config.task, few_shot=False))[1:]:
            calls = [
                f"{c['function']['name']}({c['function']['arguments']})"
                for c in message.get("tool_calls") or []
            ]
            echo(f"[{message['role']}] {' '.join(calls) or message['content']}")
    finally:
        inbox.close()


class _Parser(argparse.ArgumentParser):
    """Argument errors in one line, exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {message}\n")


def parse_args(argv: Sequence[str] | None = None) -> tuple[EmailAgentConfig, int | None]:
    """The config a command line asks for, and the question id of `--explain` (or None)."""
    parser = _Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a small smoke run")
    parser.add_argument("--sft-warmup", action="store_true", help="SFT on the scripted expert first")
    parser.add_argument(
        "--recipe", action="store_true", help="the 30-minute recipe: SFT, then RL until the budget is spent"
    )
    parser.add_argument(
        "--scaffold", choices=sorted(SCAFFOLDS), help="none, example (the default) or read (see rollout.py)"
    )
    parser.add_argument("--explain", type=int, metavar="QUESTION_ID", help="show a question and the expert")
    parser.add_argument(
        "--judge", help="RULER judge: a LiteLLM model string (or a model at --judge-base-url)"
    )
    parser.add_argument("--judge-base-url", help="an OpenAI-compatible endpoint for --judge")
    parser.add_argument("--db", help="an inbox file written by `python -m art.examples.email_agent.inbox`")
    defaults = EmailAgentConfig()
    for f in fields(EmailAgentConfig):
        value = getattr(defaults, f.name)
        if f.name not in ("judge", "judge_base_url", "db") and type(value) in (int, float, str):
            parser.add_argument(f"--{f.name.replace('_', '-')}", type=type(value), default=None)
    args = vars(parser.parse_args(argv))
    quick, explain_id, scaffold = args.pop("quick"), args.pop("explain"), args.pop("scaffold")
    recipe = args.pop("recipe")
    if quick and recipe:
        parser.error("--recipe: cannot be combined with --quick; give one of the two")
    if scaffold:
        args["task"] = SCAFFOLDS[scaffold]
    overrides = {k: v for k, v in args.items() if v is not None and v is not False}
    make = EmailAgentConfig.quick if quick else EmailAgentConfig.recipe if recipe else EmailAgentConfig
    return make(**overrides), explain_id


def main(argv: Sequence[str] | None = None) -> None:
    """Command-line entry; bad input is one line on stderr and exit status 2."""
    config, explain_id = parse_args(argv)
    try:
        if explain_id is not None:
            explain(config, explain_id)
        else:
            asyncio.run(run(config))
    except EmailAgentInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
