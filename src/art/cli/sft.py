"""`art sft FILE`: supervised fine-tuning of a model from a JSONL file, on this machine (`LocalBackend`).

The options are `art.utils.sft.train_sft_from_file`'s. The model (`--name NAME` in `--project`, under
`--base-path`) is created on first use with `--base-model`, and continues from its newest checkpoint
afterwards; the run ends with one new checkpoint, served as `NAME@STEP` by any later registration. Every
option is checked first (`check_sft_command`), then every line of the file; a bad option or line is one
line of `art.cli.checks.CLIError` (the file, the line and the fix), exit status 2, before any model is
loaded.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Annotated, Any, get_args

import typer

from art.cli import checks as check
from art.cli.checks import CLIError
from art.types import SFT_PEAK_LEARNING_RATE, TrainSFTResult
from art.utils.sft import ScheduleType

NAME = "sft"
GUIDE: tuple[tuple[str, str], ...] = (("art sft FILE ...", "supervised fine-tuning from a JSONL file"),)
"""Its lines in `art help` (usage, what it does); none: listed only by `art --help`."""


def command(
    file: Annotated[
        Path, typer.Argument(help='JSONL file: one {"messages": [...], "tools": [...]} per line.')
    ],
    name: Annotated[
        str | None,
        typer.Option(
            help="Name of the model to train (its folder under .art/; required).", show_default=False
        ),
    ] = None,
    base_model: check.BaseModelOption = "smollm2-135m",
    project: Annotated[str, typer.Option(help="Project of the model.")] = "sft",
    base_path: check.BasePathOption = ".art",
    epochs: Annotated[int, typer.Option(help="Passes over the file.")] = 1,
    batch_size: Annotated[int, typer.Option(help="Conversations per optimiser step.")] = 2,
    peak_lr: Annotated[float, typer.Option(help="Peak learning rate.")] = SFT_PEAK_LEARNING_RATE,
    schedule_type: Annotated[str, typer.Option(help="linear, cosine or constant.")] = "linear",
    warmup_ratio: Annotated[float, typer.Option(help="Fraction of the batches spent warming up.")] = 0.1,
    initial_step: Annotated[int, typer.Option(help="Batch to resume from.")] = 0,
    final_step: Annotated[int | None, typer.Option(help="Batch to stop before (default: the end).")] = None,
    shuffle_buffer_size: Annotated[int, typer.Option(help="Lines shuffled together in memory.")] = 10000,
    skip_invalid: Annotated[bool, typer.Option(help="Skip (and count) invalid lines.")] = False,
    seed: Annotated[int, typer.Option(help="Seed of the shuffle.")] = 42,
    verbose: Annotated[bool, typer.Option(help="Print each batch.")] = False,
    model: Annotated[str | None, typer.Option("--model", hidden=True)] = None,  # deprecated: --name
) -> None:
    """Supervised fine-tuning from a JSONL file (the options of art.utils.sft.train_sft_from_file)."""
    options = {k: v for k, v in locals().items() if k not in ("file", "model", "name")}
    name = check.deprecated_alias("sft", "--model", "--name", model, name or "", "")
    if not name:
        raise CLIError(
            "--name", "missing", "give the model's name, e.g. --name agent-001 (its folder under .art/)"
        )
    main(SFTCommand(file=str(file), name=name, **options), typer.echo)


@dataclass
class SFTCommand:
    """Everything `art sft` was given (see `train_sft_from_file` for the training options)."""

    file: str
    name: str
    base_model: str = "smollm2-135m"
    project: str = "sft"
    base_path: str = ".art"
    epochs: int = 1
    batch_size: int = 2
    peak_lr: float = SFT_PEAK_LEARNING_RATE
    schedule_type: ScheduleType = "linear"
    warmup_ratio: float = 0.1
    initial_step: int = 0
    final_step: int | None = None
    shuffle_buffer_size: int = 10000
    skip_invalid: bool = False
    seed: int = 42
    verbose: bool = False

    def training_options(self) -> dict[str, Any]:
        """The options of `train_sft_from_file`, by name: every field after the file's and the model's."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _MODEL_FIELDS}


_MODEL_FIELDS = ("file", "name", "base_model", "project", "base_path")


def check_sft_command(command: SFTCommand) -> None:
    """Raise CLIError for the first bad option, then for the first bad line of the file (unless
    --skip-invalid); nothing is loaded."""
    from art.utils.sft import scan_file

    check.record_name("--name", command.name)
    check.record_name("--project", command.project)
    check.base_model("--base-model", command.base_model)
    check.folder_or_new("--base-path", command.base_path)
    check.at_least("--epochs", command.epochs, 1, "passes over the file")
    check.at_least("--batch-size", command.batch_size, 1, "a batch")
    check.positive(
        "--peak-lr", command.peak_lr, "a learning rate", check.short_number(SFT_PEAK_LEARNING_RATE)
    )
    check.one_of("--schedule-type", command.schedule_type, get_args(ScheduleType))
    check.fraction("--warmup-ratio", command.warmup_ratio, "a fraction of the batches")
    check.at_least("--initial-step", command.initial_step, 0, "a batch to resume from")
    if command.final_step is not None and command.final_step <= command.initial_step:
        raise CLIError(
            "--final-step",
            f"{command.final_step} is not after --initial-step {command.initial_step}",
            "give a later batch, or leave it out to train to the end",
        )
    check.at_least("--shuffle-buffer-size", command.shuffle_buffer_size, 1, "a shuffle buffer")
    check.existing_file("FILE", command.file, 'a JSONL file with one {"messages": [...]} per line')
    try:
        scan_file(command.file, skip_invalid=command.skip_invalid)
    except ValueError as exc:  # SFTFileError: the file, the line and the fix; or not a .jsonl file
        problem, _, fix = str(exc).partition("; ")
        raise CLIError("FILE", problem, fix) from None


async def run_sft_command(command: SFTCommand, echo: Callable[[str], None] = print) -> TrainSFTResult:
    """Check the options and the file, register the model with a LocalBackend, train from the file, print
    a summary."""
    from art.backends.local import LocalBackend
    from art.model import TrainableModel
    from art.utils.sft import train_sft_from_file

    check_sft_command(command)  # bad options and data fail before the model loads
    model = TrainableModel(
        name=command.name,
        project=command.project,
        base_model=command.base_model,
        base_path=command.base_path,
    )
    async with LocalBackend() as backend:
        echo(f"Loading {command.base_model} for {command.project}/{command.name}...")
        await model.register(backend)
        result = await train_sft_from_file(model, command.file, **command.training_options())
    m = result.metrics
    echo(
        f"step {result.step} ({model.get_inference_name(result.step)}): loss {m.get('loss/train', float('nan')):.4f} "
        f"over {int(m.get('data/step_num_gradient_steps', 0))} batches, "
        f"{int(m.get('data/step_trainer_tokens', 0))} trained tokens, "
        f"{int(m.get('data/step_num_dropped_trajectories', 0))} conversations skipped"
    )
    if result.message:
        echo(result.message)
    echo(f"checkpoint: {model.storage.checkpoint_dir(result.step)}")
    echo(f"history:    {model.storage.history_path}")
    return result


def main(command: SFTCommand, echo: Callable[[str], None]) -> None:
    """Run the command; a bad option or line raises CLIError (exit status 2) before anything loads."""
    with check.registration_errors():
        asyncio.run(run_sft_command(command, echo))
