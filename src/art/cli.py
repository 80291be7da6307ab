"""The `art` command: `art demo` trains an agent on the embedded default model; `art plot` draws history;
`art sft FILE` fine-tunes a model on a JSONL file of conversations.

Also reachable as `python -m art ...`.
"""

from __future__ import annotations

import asyncio
import json
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
        str | None,
        typer.Option(help="Name of the trained model (its folder under .art/; default tic-tac-toe[-sft])."),
    ] = None,
    base_path: Annotated[str, typer.Option(help="Where the record is kept.")] = ".art",
    seed: Annotated[int, typer.Option(help="Seed of the training games.")] = 0,
    sft_warmup: Annotated[
        bool, typer.Option("--sft-warmup", help="First fine-tune on a perfect teacher's games, then RL.")
    ] = False,
) -> None:
    """Train the default model (SmolLM2-135M) to play tic-tac-toe against a random opponent, on this machine.

    Prints a line per step, writes history.jsonl and a PNG plot, and ends with base vs trained on the
    same held-out games. A run continues from the newest checkpoint of a model with the same name.
    With --sft-warmup, step 1 first fine-tunes on games of a perfect minimax teacher (supervised), then RL
    continues on the same adapter.
    """
    from art.examples.tic_tac_toe.train import demo_config, run_demo

    overrides: dict[str, object] = {"base_model": model, "base_path": base_path, "seed": seed}
    if name is not None:
        overrides["name"] = name
    for key, value in (
        ("steps", steps),
        ("group_size", group_size),
        ("learning_rate", learning_rate),
        ("val_games", val_games),
    ):
        if value is not None:
            overrides[key] = value
    config = demo_config(quick=quick, sft_warmup=sft_warmup, **overrides)
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
    history = [json.loads(line) for line in history_path.read_text().splitlines() if line.strip()]
    path = plot_history(
        history, out or model_dir / "plots" / "history.png", metrics or ("train/reward", "val/reward")
    )
    typer.echo(str(path))


@app.command()
def sft(
    file: Annotated[
        Path, typer.Argument(help='JSONL file: one {"messages": [...], "tools": [...]} per line.')
    ],
    model: Annotated[str, typer.Option(help="Name of the model to train (its folder under .art/).")],
    base_model: Annotated[
        str, typer.Option(help="Base model: a short name, a Hugging Face id or a local folder.")
    ] = "smollm2-135m",
    project: Annotated[str, typer.Option(help="Project of the model.")] = "sft",
    base_path: Annotated[str, typer.Option(help="Where the record is kept.")] = ".art",
    epochs: Annotated[int, typer.Option(help="Passes over the file.")] = 1,
    batch_size: Annotated[int, typer.Option(help="Conversations per optimiser step.")] = 2,
    peak_lr: Annotated[float, typer.Option(help="Peak learning rate.")] = 2e-4,
    schedule_type: Annotated[str, typer.Option(help="linear, cosine or constant.")] = "linear",
    warmup_ratio: Annotated[float, typer.Option(help="Fraction of the batches spent warming up.")] = 0.1,
    initial_step: Annotated[int, typer.Option(help="Batch to resume from.")] = 0,
    final_step: Annotated[int | None, typer.Option(help="Batch to stop before (default: the end).")] = None,
    shuffle_buffer_size: Annotated[int, typer.Option(help="Lines shuffled together in memory.")] = 10000,
    skip_invalid: Annotated[bool, typer.Option(help="Skip (and count) invalid lines.")] = False,
    seed: Annotated[int, typer.Option(help="Seed of the shuffle.")] = 42,
    verbose: Annotated[bool, typer.Option(help="Print each batch.")] = False,
) -> None:
    """Supervised fine-tuning from a JSONL file (the options of art.utils.sft.train_sft_from_file)."""
    from art.sft_command import SFTCommand, main

    options = {k: v for k, v in locals().items() if k not in ("file", "SFTCommand", "main")}
    status = main(SFTCommand(file=str(file), **options), typer.echo, lambda m: typer.echo(m, err=True))
    raise typer.Exit(status)


def main() -> None:
    """Entry point of the `art` console script."""
    app()


if __name__ == "__main__":
    main()
