"""`art demo`: the tic-tac-toe agent trained on the embedded default model, here or on a running `art serve`.

Every option is checked first (`art.cli.checks`: one line, exit 2), then the example's own code runs
(`art.examples.tic_tac_toe.train`), in this process or through `RemoteBackend`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated

import typer

from art.cli import checks as check
from art.cli.checks import CLIError

if TYPE_CHECKING:
    from art.examples.tic_tac_toe.train import DemoConfig

NAME = "demo"
DEFAULT_BASE_MODEL = "smollm2-135m"
GUIDE: tuple[tuple[str, str], ...] = (
    ("art demo", "train the embedded SmolLM2-135M at tic-tac-toe on this machine"),
)
"""Its lines in `art help` (usage, what it does); none: listed only by `art --help`."""


def command(
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
    base_model: Annotated[
        str, typer.Option(help="Base model: a short name, a Hugging Face id or a local folder.")
    ] = DEFAULT_BASE_MODEL,
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
    base_path: Annotated[str, typer.Option(help="Where the record is kept.")] = ".art",
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

    Step 1 fine-tunes on 96 games of a perfect minimax teacher (supervised: the move format and sound
    play), then 7 RL steps continue on the same adapter at 5e-5, against the random opponent. Prints a line
    per step, writes history.jsonl and a PNG plot, and ends with base vs trained on the same held-out
    games. A run continues from the newest checkpoint of a model with the same name.
    With --rl-only, 8 steps of RL alone (lr 1.5e-4). With --sft-warmup, the same start, then RL until 30
    minutes of training are spent: the recipe that reached 86-92% held-out wins with under 5% illegal
    moves for 3 of 3 seeds on a 2-core CPU (benchmarks/README.md).
    """
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
