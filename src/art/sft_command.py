"""`art sft FILE`: supervised fine-tuning of a model from a JSONL file, on this machine (`LocalBackend`).

The options are `art.utils.sft.train_sft_from_file`'s. The model (`--model NAME` in `--project`, under
`--base-path`) is created on first use with `--base-model`, and continues from its newest checkpoint
afterwards; the run ends with one new checkpoint, served as `NAME@STEP` by any later registration. Bad data
exits with status 2 and a message naming the file, the line and the fix, before any model is loaded.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from .types import TrainSFTResult
from .utils.sft import ScheduleType


@dataclass
class SFTCommand:
    """Everything `art sft` was given (see `train_sft_from_file` for the training options)."""

    file: str
    model: str
    base_model: str = "smollm2-135m"
    project: str = "sft"
    base_path: str = ".art"
    epochs: int = 1
    batch_size: int = 2
    peak_lr: float = 2e-4
    schedule_type: ScheduleType = "linear"
    warmup_ratio: float = 0.1
    initial_step: int = 0
    final_step: int | None = None
    shuffle_buffer_size: int = 10000
    skip_invalid: bool = False
    seed: int = 42
    verbose: bool = False


async def run_sft_command(command: SFTCommand, echo: Callable[[str], None] = print) -> TrainSFTResult:
    """Check the file, register the model with a LocalBackend, train from the file, print a summary."""
    import art
    from art.local import LocalBackend
    from art.utils.sft import scan_file, train_sft_from_file

    scan_file(command.file, skip_invalid=command.skip_invalid)  # bad data fails before the model loads
    model = art.TrainableModel(
        name=command.model,
        project=command.project,
        base_model=command.base_model,
        base_path=command.base_path,
    )
    async with LocalBackend() as backend:
        echo(f"Loading {command.base_model} for {command.project}/{command.model}...")
        await model.register(backend)
        result = await train_sft_from_file(
            model,
            command.file,
            epochs=command.epochs,
            batch_size=command.batch_size,
            peak_lr=command.peak_lr,
            schedule_type=command.schedule_type,
            warmup_ratio=command.warmup_ratio,
            initial_step=command.initial_step,
            final_step=command.final_step,
            verbose=command.verbose,
            shuffle_buffer_size=command.shuffle_buffer_size,
            skip_invalid=command.skip_invalid,
            seed=command.seed,
        )
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


def main(command: SFTCommand, echo: Callable[[str], None], echo_error: Callable[[str], None]) -> int:
    """Run the command; returns the exit status (2 with a one-line message for bad input)."""
    try:
        asyncio.run(run_sft_command(command, echo))
    except (ValueError, FileNotFoundError) as e:
        echo_error(f"error: {e}")
        return 2
    return 0
