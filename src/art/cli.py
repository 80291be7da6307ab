"""The `art` command: `art demo` trains an agent on the embedded default model; `art plot` draws history.

Also reachable as `python -m art ...`.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(
    help="ART, the Agent Reinforcement Trainer: improve an LLM agent from its own experience.",
    no_args_is_help=True,
    add_completion=False,
)


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
    model_dir: Annotated[Path, typer.Argument(help="A model's folder, e.g. .art/demo/models/tic-tac-toe")],
    metrics: Annotated[
        list[str] | None, typer.Option("--metric", help="Metric to draw (repeatable).")
    ] = None,
    out: Annotated[
        Path | None, typer.Option(help="PNG path (default: <model_dir>/plots/history.png).")
    ] = None,
) -> None:
    """Plot metrics of a model's history.jsonl per step."""
    from art.plotting import plot_history

    history_path = model_dir / "history.jsonl"
    if not history_path.exists():
        raise typer.BadParameter(
            f"{history_path} does not exist; pass a model folder under .art/", param_hint="MODEL_DIR"
        )
    from art.storage import read_history_file

    history = read_history_file(history_path)  # a line torn by a crash is skipped with a warning
    path = plot_history(
        history, out or model_dir / "plots" / "history.png", metrics or ("train/reward", "val/reward")
    )
    typer.echo(str(path))


def main() -> None:
    """Entry point of the `art` console script."""
    app()


if __name__ == "__main__":
    main()
