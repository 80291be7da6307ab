"""`art plot MODEL_DIR`: a model's history per step as a PNG."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from art.cli.checks import CLIError

NAME = "plot"
GUIDE: tuple[tuple[str, str], ...] = ()
"""Its lines in `art help` (usage, what it does); none: listed only by `art --help`."""


def command(
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
    from art.record.plots import DEFAULT_METRICS, logged_metrics, plot_history
    from art.record.storage import read_history_file

    history_path = model_dir / "history.jsonl"
    if not history_path.is_file():
        found = sorted(str(p.parent) for p in Path(".art").glob("*/models/*/history.jsonl"))
        hint = (
            f"models with a history here: {', '.join(found)}"
            if found
            else "no model has a history under ./.art"
        )
        raise CLIError("MODEL_DIR", f"no history.jsonl in {model_dir}", f"pass a model's folder ({hint})")
    if out is not None and out.is_dir():
        raise CLIError("--out", f"{out} is a folder", "give the PNG file's path, e.g. plots/history.png")
    history = read_history_file(history_path)
    logged = logged_metrics(history)  # the metrics checked before matplotlib loads, as plot_history would
    have = f"logged metrics: {', '.join(logged) or 'none'}"
    missing = [m for m in metrics or [] if m not in logged]
    if missing:
        problem = f"no metric {', '.join(map(repr, missing))} in this history"
        raise CLIError("--metric", f"{history_path}: {problem}", have)
    if not metrics and not set(DEFAULT_METRICS) & set(logged):
        problem = f"none of the default metrics ({', '.join(DEFAULT_METRICS)}) was logged"
        raise CLIError("MODEL_DIR", f"{history_path}: {problem}", have)
    try:
        path = plot_history(
            history, out or model_dir / "plots" / "history.png", metrics or None, title=model_dir.name
        )
    except ValueError as exc:
        problem, _, fix = str(exc).partition("; ")
        raise CLIError("--metric" if metrics else "MODEL_DIR", f"{history_path}: {problem}", fix) from None
    typer.echo(str(path))
