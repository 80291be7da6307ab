"""`art demo [TASK]`: an example agent trained on the embedded default model, here or on a running `art serve`.

TASK is `tic-tac-toe` (the default: `art demo` alone) or `email` (ART-E, the email-search agent). Every
option is checked first (`art.cli.checks`: one line, exit 2), then the example's own code runs
(`art.examples.tic_tac_toe.train`, `art.examples.email_agent.train` with its own defaults), in this
process or through `RemoteBackend`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Annotated

import typer

from art.cli import checks as check
from art.cli.checks import CLIError

if TYPE_CHECKING:
    from art.examples.email_agent.train import EmailAgentConfig
    from art.examples.tic_tac_toe.train import DemoConfig

NAME = "demo"
DEFAULT_BASE_MODEL = "smollm2-135m"
TASKS = ("tic-tac-toe", "email")
"""The demo's tasks, the default first."""
GUIDE: tuple[tuple[str, str], ...] = (
    ("art demo", "train the embedded SmolLM2-135M at tic-tac-toe on this machine"),
    ("art demo email", "train it to answer questions about an inbox with search tools (ART-E)"),
)
"""Its lines in `art help` (usage, what it does); none: listed only by `art --help`."""


def command(
    task: Annotated[
        str,
        typer.Argument(
            help="The task: tic-tac-toe (a game against a random opponent) or email (questions about a "
            "synthetic inbox, answered with search and read tools)."
        ),
    ] = TASKS[0],
    steps: Annotated[
        int | None,
        typer.Option(
            help="RL steps (default 7 after the SFT step, 8 with --rl-only; 2 with --quick; with "
            "--sft-warmup, as many as the budget allows).",
            show_default=False,
        ),
    ] = None,
    group_size: Annotated[int | None, typer.Option(help="Games per training scenario (default 8).")] = None,
    quick: Annotated[bool, typer.Option("--quick", help="A two-minute smoke run.")] = False,
    base_model: check.BaseModelOption = DEFAULT_BASE_MODEL,
    learning_rate: Annotated[
        float | None,
        typer.Option(
            help="RL's AdamW learning rate (default 5e-5 after the SFT step; 1.5e-4 with --rl-only).",
            show_default=False,
        ),
    ] = None,
    val_games: Annotated[int | None, typer.Option(help="Held-out games per evaluation.")] = None,
    name: Annotated[
        str | None,
        typer.Option(
            help="Name of the trained model (its folder under .art/; default tic-tac-toe, tic-tac-toe-rl "
            "with --rl-only, tic-tac-toe-sft with --sft-warmup)."
        ),
    ] = None,
    base_path: check.BasePathOption = ".art",
    seed: Annotated[int, typer.Option(help="Seed of the training games.")] = 0,
    sft_warmup: Annotated[
        bool,
        typer.Option("--sft-warmup", help="The 30-minute recipe: SFT, then RL until the budget is spent."),
    ] = False,
    rl_only: Annotated[
        bool, typer.Option("--rl-only", help="RL alone: no SFT step on the teacher's games.")
    ] = False,
    time_budget_minutes: Annotated[
        float | None,
        typer.Option(
            help="Minutes of training (held-out games not counted) to stay within; with --steps 1000, RL "
            "runs until the budget is spent (--sft-warmup runs so, with 30; 0: no budget).",
            show_default=False,
        ),
    ] = None,
    remote: Annotated[
        str | None,
        typer.Option(help="Train on a running `art serve` at this URL instead of in this process."),
    ] = None,
    api_key: Annotated[
        str | None, typer.Option(envvar="ART_API_KEY", help="The --remote server's key.", show_default=False)
    ] = None,
    model: Annotated[str | None, typer.Option("--model", hidden=True)] = None,  # deprecated: --base-model
) -> None:
    """Train the default model (SmolLM2-135M) to play tic-tac-toe against a random opponent, on this machine.

    `art demo email` trains it instead as an email-search agent (examples/email_agent: search_emails,
    read_email and return_final_answer over a seeded SQLite FTS5 inbox) with the example's own defaults;
    the options given here override them, and it ends with the same table: base vs trained on held-out
    questions, correct answers, malformed tool calls, median tool calls per question. `art demo email
    --sft-warmup` is its 30-minute recipe: SFT on 384 episodes of a scripted expert, then RL at 2e-5.

    Step 1 fine-tunes on 96 games of a perfect minimax teacher (supervised: the move format and sound
    play), then 7 RL steps continue on the same adapter at 5e-5, against the random opponent. Prints a line
    per step, writes history.jsonl and a PNG plot, and ends with base vs trained on the same held-out
    games. A run continues from the newest checkpoint of a model with the same name.
    With --rl-only, 8 steps of RL alone (lr 1.5e-4). With --sft-warmup, the same start, then RL until 30
    minutes of training are spent: the recipe that reached 86-92% held-out wins with under 5% illegal
    moves for 3 of 3 seeds on a 2-core CPU (benchmarks/README.md).
    """
    if task not in TASKS:
        raise CLIError("TASK", f"{task!r} is not a demo task", f"known tasks: {', '.join(TASKS)}")
    if sft_warmup and rl_only:
        raise CLIError("--rl-only", "cannot be combined with --sft-warmup", "give one of the two")
    check.at_least("--steps", steps, 1, "training steps")
    check.at_least("--group-size", group_size, 2, "a group (GRPO compares games of the same scenario)")
    check.positive("--learning-rate", learning_rate, "a learning rate", "1.5e-4")
    check.at_least("--val-games", val_games, 0, "held-out games")
    check.at_least("--time-budget-minutes", time_budget_minutes, 0, "a time budget")
    base_model = check.deprecated_alias(
        "demo", "--model", "--base-model", model, base_model, DEFAULT_BASE_MODEL
    )
    check.base_model("--base-model", base_model, here=remote is None)  # with --remote, the server checks
    if name is not None:
        check.record_name("--name", name)
    check.folder_or_new("--base-path", base_path)
    if remote is not None and not remote.startswith(("http://", "https://")):
        raise CLIError(
            "--remote", f"{remote!r} is not a URL", "give the `art serve` address, e.g. http://gpu-box:7999"
        )
    if task == "email":
        given: dict[str, object] = {"steps": steps, "group_size": group_size, "learning_rate": learning_rate}
        given |= {"time_budget_minutes": time_budget_minutes, "name": name, "val_games": val_games}
        config = email_config(quick, sft_warmup, rl_only, remote, base_model, base_path, seed, given)
        with check.registration_errors(), email_errors():
            run_email(config, remote, api_key, echo=typer.echo)
        return
    from art.examples.tic_tac_toe.train import demo_config, run_demo

    overrides: dict[str, object] = {"base_model": base_model, "base_path": base_path, "seed": seed}
    if name is not None:
        overrides["name"] = name
    for key, value in (
        ("steps", steps),
        ("group_size", group_size),
        ("learning_rate", learning_rate),
        ("val_games", val_games),
        ("time_budget_minutes", time_budget_minutes),
    ):
        if value is not None:
            overrides[key] = value
    if remote is not None and not rl_only:
        if sft_warmup:
            raise CLIError("--sft-warmup", "art serve trains RL only (no SFT)", "drop it, or train here")
        typer.echo("art serve trains RL only (no SFT step): running the demo as --rl-only")
        rl_only = True
    config = demo_config(quick=quick, sft_warmup=sft_warmup, rl_only=rl_only, **overrides)
    with check.registration_errors():  # a record kept for another base model, a base model that fails
        if remote is None:
            asyncio.run(run_demo(config, echo=typer.echo))
        else:
            run_remote_demo(config, remote, api_key, echo=typer.echo)


def run_remote_demo(
    config: DemoConfig, url: str, api_key: str | None, *, echo: Callable[[str], None]
) -> None:
    """`art demo --remote URL`: the demo, trained by the `art serve` at `url`."""
    from art.backends.remote import RemoteBackend
    from art.examples.tic_tac_toe.train import run_demo

    async def main() -> None:
        async with RemoteBackend(url, api_key) as backend:
            echo(f"training on art serve at {backend.url}")
            await run_demo(config, backend=backend, echo=echo)

    asyncio.run(main())


@contextlib.contextmanager
def email_errors() -> Iterator[None]:
    """The email example's bad input (`EmailAgentInputError`, "field: problem; fix") as `CLIError`, naming
    the demo's flag where the field is one (--seed, --steps, ...)."""
    from art.examples.email_agent.inbox import EmailAgentInputError

    try:
        yield
    except EmailAgentInputError as exc:
        field, _, rest = str(exc).partition(": ")
        flag = "--" + field.replace("_", "-")
        problem, _, fix = rest.partition("; ")
        raise CLIError(
            flag if flag in _EMAIL_FLAGS else field, problem, fix or "see `art demo --help`"
        ) from None


_EMAIL_FLAGS = ("--seed", "--steps", "--group-size", "--learning-rate", "--time-budget-minutes", "--name")


def email_config(
    quick: bool, sft_warmup: bool, rl_only: bool, remote: str | None, base_model: str, base_path: str,
    seed: int, given: dict[str, object],
) -> EmailAgentConfig:  # fmt: skip
    """`art demo email`'s config: the example's defaults (`EmailAgentConfig`; `.quick()` with --quick, the
    30-minute `.recipe()` with --sft-warmup) with the options given; checked as the example checks it
    (seed, sizes, rates), before anything loads."""
    from art.examples.email_agent.train import EmailAgentConfig

    if given.pop("val_games") is not None:
        raise CLIError(
            "--val-games", "counts tic-tac-toe's held-out games", "leave it out with `art demo email`"
        )
    if remote is not None and sft_warmup:
        raise CLIError("--sft-warmup", "art serve trains RL only (no SFT)", "drop it, or train here")
    overrides = {key: value for key, value in given.items() if value is not None}
    overrides |= {"base_model": base_model, "base_path": base_path, "seed": seed}
    if sft_warmup or rl_only:
        overrides["sft_warmup"] = sft_warmup
    with email_errors():
        if quick:
            config = EmailAgentConfig.quick(**overrides)
        elif sft_warmup:
            config = EmailAgentConfig.recipe(**overrides)
        else:
            config = EmailAgentConfig(**overrides)
        if remote is not None and config.sft_warmup:
            raise CLIError("--remote", "art serve trains RL only (no SFT)", "add --rl-only, or train here")
        config.validate()
        config.inbox_config()  # the seed's range
    return config


def run_email(
    config: EmailAgentConfig, url: str | None, api_key: str | None, *, echo: Callable[[str], None]
) -> None:
    """`art demo email`: the email agent's train script (`art.examples.email_agent.train.run`), in this
    process or on the `art serve` at `url`."""
    from art.examples.email_agent.train import run

    async def main() -> None:
        if url is None:
            await run(config, echo=echo)
            return
        from art.backends.remote import RemoteBackend

        async with RemoteBackend(url, api_key) as backend:
            echo(f"training on art serve at {backend.url}")
            await run(config, backend=backend, echo=echo)

    asyncio.run(main())
