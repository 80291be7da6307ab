"""The `art` command: `art demo` trains an agent on the embedded default model; `art plot` draws history.

Also reachable as `python -m art ...`. `art` alone prints the help. A user's mistake (a bad option, a
missing folder, an unknown metric) is one line on stderr, `art: <what is wrong and what to do>`, with exit
code 2; never a traceback (set ART_DEBUG=1 to see one for a failure that is not the user's).
Help is click's plain layout: sentences wrap whole and flags show as flags.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(
    help="ART, the Agent Reinforcement Trainer: improve an LLM agent from its own experience.",
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)


# The click that typer runs on (typer >= 0.2x vendors its own copy): its usage-error class, found from an
# exception typer exports, so this works whichever click is underneath.
_UsageError: type[Exception] = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")


class CLIError(Exception):
    """A mistake of the user's: `main` prints it as one line (`art: ...`) and exits with code 2."""


@app.callback(invoke_without_command=True)
def _root(ctx: typer.Context) -> None:
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())
        raise typer.Exit(0)


@app.command()
def demo(
    steps: Annotated[int | None, typer.Option(help="Training steps (default 8; 2 with --quick).")] = None,
    group_size: Annotated[int | None, typer.Option(help="Games per training scenario (default 8).")] = None,
    quick: Annotated[bool, typer.Option("--quick", help="A two-minute smoke run.")] = False,
    model: Annotated[
        str, typer.Option(help="Base model: a short name, a Hugging Face id or a local folder.")
    ] = "smollm2-135m",
    learning_rate: Annotated[float | None, typer.Option(help="AdamW learning rate.")] = None,
    val_games: Annotated[int | None, typer.Option(help="Held-out games per evaluation.")] = None,
    name: Annotated[
        str, typer.Option(help="Name of the trained model (its folder under .art/).")
    ] = "tic-tac-toe",
    base_path: Annotated[str, typer.Option(help="Where the record is kept.")] = ".art",
    seed: Annotated[int, typer.Option(help="Seed of the training games.")] = 0,
) -> None:
    """Train the default model (SmolLM2-135M) to play tic-tac-toe against a random opponent, on this machine.

    Prints a line per step, writes history.jsonl and a PNG plot, and ends with base vs trained on the
    same held-out games. A run continues from the newest checkpoint of a model with the same name.
    """
    from art.examples.tic_tac_toe.train import DemoConfig, run_demo

    overrides: dict[str, object] = {"base_model": model, "name": name, "base_path": base_path, "seed": seed}
    for key, value in (
        ("steps", steps),
        ("group_size", group_size),
        ("learning_rate", learning_rate),
        ("val_games", val_games),
    ):
        if value is not None:
            overrides[key] = value
    config = DemoConfig.quick(**overrides) if quick else DemoConfig(**overrides)
    asyncio.run(run_demo(config, echo=typer.echo))


@app.command()
def plot(
    model_dir: Annotated[
        Path, typer.Argument(help="A model's folder, e.g. .art/demo/models/tic-tac-toe.", show_default=False)
    ],
    metrics: Annotated[
        list[str] | None,
        typer.Option(
            "--metric",
            help="A metric to draw (repeatable). Default: the reward and win rate per step, as `art demo` draws.",
            show_default=False,
        ),
    ] = None,
    out: Annotated[
        Path | None, typer.Option(help="Where to write the PNG (default: MODEL_DIR/plots/history.png).")
    ] = None,
) -> None:
    """Plot a model's history per step.

    Draws the metrics of MODEL_DIR/history.jsonl (what training and `model.log` recorded) as a PNG and
    prints its path.
    """
    from art.plotting import plot_history
    from art.storage import read_history_file

    history_path = model_dir / "history.jsonl"
    if not history_path.is_file():
        found = sorted(str(p.parent) for p in Path(".art").glob("*/models/*/history.jsonl"))
        hint = (
            f"models with a history here: {', '.join(found)}"
            if found
            else "no model has a history under ./.art"
        )
        raise CLIError(f"no history.jsonl in {model_dir}; pass a model's folder ({hint})")
    history = read_history_file(history_path)
    try:
        path = plot_history(
            history, out or model_dir / "plots" / "history.png", metrics or None, title=model_dir.name
        )
    except ValueError as exc:
        raise CLIError(f"{history_path}: {exc}") from None
    typer.echo(str(path))


def _command_name(argv: list[str]) -> str:
    """The subcommand named in `argv` (for help hints), or "" for the root."""
    names = {c.name for c in typer.main.get_command(app).commands.values()}  # type: ignore[attr-defined]
    return next((a for a in argv if a in names), "")


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `art` console script: runs the command; user errors become one line, exit 2."""
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        code = app(args=args, prog_name="art", standalone_mode=False)
    except _UsageError as exc:  # bad or missing options and arguments, unknown commands
        command = _command_name(args)
        message = " ".join(exc.format_message().split())  # type: ignore[attr-defined]
        typer.echo(f"art: {message} (see `art {command + ' ' if command else ''}--help`)", err=True)
        sys.exit(2)
    except CLIError as exc:
        typer.echo(f"art: {exc}", err=True)
        sys.exit(2)
    except (typer.Abort, KeyboardInterrupt):
        typer.echo("art: interrupted", err=True)
        sys.exit(130)
    except Exception as exc:  # not the user's mistake: still one line, the traceback on request
        if os.environ.get("ART_DEBUG"):
            raise
        typer.echo(f"art: {type(exc).__name__}: {exc} (set ART_DEBUG=1 to see the traceback)", err=True)
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
