"""Supervised fine-tuning helpers (the reference's `art.utils.sft`): JSONL files, chunks, LR schedules.

- `create_lr_schedule`: warmup then cosine, linear or constant; one value per batch.
- `create_sft_dataset_iterator`: a list of trajectories as chunks of batches, each chunk one
  `model.train_sft` call (so one checkpoint and one logged entry per chunk), with the schedule computed over
  the whole run and sliced per chunk; resumable with `initial_step`.
- `iterate_file`: stream trajectories from a JSONL file (`{"messages": [...], "tools": [...]}` per line,
  the last message an assistant turn) with a seeded shuffle buffer, so a file larger than memory works.
- `train_sft_from_file`: the whole run from a file in one `model.train_sft` call, resumable with
  `initial_step` and stoppable at `final_step`; what `art sft FILE` runs.

A line that cannot be trained (not JSON, no `messages`, an unknown role, a tool call whose arguments are
not a JSON string, a conversation that does not end with an assistant turn) is an error naming the file,
the line and the fix; with `skip_invalid=True` it is skipped, counted and reported instead. The
conversation's length is checked by the trainer (which has the tokenizer), with the same rule.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import random
import warnings
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from art.trajectories import (
    SFT_SKIP_HINT,
    SOURCE_FILE,
    SOURCE_LINE,
    Trajectory,
    validate_sft_messages,
)
from art.types import SFT_PEAK_LEARNING_RATE, TrainSFTConfig

if TYPE_CHECKING:
    from art.model import TrainableModel
    from art.types import TrainSFTResult

logger = logging.getLogger(__name__)

ScheduleType = Literal["cosine", "linear", "constant"]


class SFTChunk(NamedTuple):
    """One `model.train_sft` call's worth of a dataset: its trajectories, config (batch size and one
    learning rate per batch), first global batch step, epoch, and first batch step within the epoch.

    Example:
        for chunk in create_sft_dataset_iterator(trajectories, epochs=2, batch_size=4):
            await model.train_sft(chunk.trajectories, chunk.config)
    """

    trajectories: list[Trajectory]
    config: TrainSFTConfig
    step: int
    epoch: int
    epoch_step: int


def resolve_sft_batch_size(*, batch_size: int | Literal["auto"], default_batch_size: int) -> int:
    """A concrete batch size: `batch_size` itself, or `default_batch_size` for "auto" (the reference's helper).

    Example:
        >>> resolve_sft_batch_size(batch_size="auto", default_batch_size=4)
        4
    """
    if batch_size == "auto":
        return default_batch_size
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f'batch_size={batch_size!r}: use a whole number >= 1 or "auto"')
    return batch_size


# ---- learning-rate schedules -----------------------------------------------------------------------


def create_lr_schedule(
    total_steps: int,
    peak_lr: float,
    method: ScheduleType = "linear",
    warmup_steps: int = 0,
    min_lr: float = 0.0,
) -> list[float]:
    """One learning rate per step: a linear warmup to `peak_lr`, then a decay to `min_lr`.

    Warmup step k (0-based, k < warmup_steps) is `min_lr + (peak_lr - min_lr) * (k + 1) / warmup_steps`,
    so the first step is not 0. After it, with `progress` going from 0 to 1 over the remaining steps:
    "linear" is `peak_lr - (peak_lr - min_lr) * progress`, "cosine" is
    `min_lr + (peak_lr - min_lr) * (1 + cos(pi * progress)) / 2`, "constant" stays at `peak_lr`.

    Example:
        >>> create_lr_schedule(5, 1e-4, "linear", warmup_steps=1)
        [0.0001, 0.0001, 6.666666666666667e-05, 3.3333333333333335e-05, 0.0]
    """
    if method not in ("cosine", "linear", "constant"):
        raise ValueError(f"Unknown method: {method}. Choose from: cosine, linear, constant")
    if total_steps <= 0:
        return []
    decay_steps = total_steps - warmup_steps
    rates: list[float] = []
    for step in range(total_steps):
        if step < warmup_steps:
            lr = min_lr + (peak_lr - min_lr) * ((step + 1) / warmup_steps)
        else:
            progress = (step - warmup_steps) / (decay_steps - 1) if decay_steps > 1 else 0.0
            if method == "cosine":
                lr = min_lr + (peak_lr - min_lr) * 0.5 * (1 + math.cos(math.pi * progress))
            elif method == "linear":
                lr = peak_lr - (peak_lr - min_lr) * progress
            else:
                lr = peak_lr
        rates.append(lr)
    return rates


def _check_run_options(epochs: int, batch_size: int, warmup_ratio: float, initial_step: int) -> None:
    if epochs < 1:
        raise ValueError(f"epochs must be at least 1, got {epochs}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    if not 0.0 <= warmup_ratio <= 1.0:
        raise ValueError(f"warmup_ratio must be between 0 and 1, got {warmup_ratio}")
    if initial_step < 0:
        raise ValueError(f"initial_step must be 0 or more, got {initial_step}")


# ---- in-memory datasets ----------------------------------------------------------------------------


def create_sft_dataset_iterator(
    trajectories: Sequence[Trajectory],
    chunk_size: int = 10,
    epochs: int = 1,
    batch_size: int = 2,
    peak_lr: float = SFT_PEAK_LEARNING_RATE,
    schedule_type: ScheduleType = "linear",
    warmup_ratio: float = 0.1,
    shuffle: bool = True,
    seed: int = 42,
    initial_step: int = 0,
    show_progress: bool = True,
) -> Generator[SFTChunk, None, None]:
    """Chunks of `chunk_size` batches for successive `model.train_sft` calls.

    The schedule covers all `ceil(len / batch_size) * epochs` batches and each chunk gets its slice, so
    warmup and decay are right across chunks. Each epoch is shuffled with `random.Random(seed + epoch)`.
    `initial_step` (a global batch step, e.g. the number of batches trained so far) resumes: chunks that
    end at or before it are skipped. (The reference skips `initial_step // chunk_size` chunks, which is the
    same when every epoch is a whole number of chunks and replays a chunk otherwise.)

    Example:
        for chunk in create_sft_dataset_iterator(trajectories, epochs=3, batch_size=2, peak_lr=2e-4):
            await model.train_sft(chunk.trajectories, chunk.config)
    """
    from tqdm.auto import tqdm

    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    _check_run_options(epochs, batch_size, warmup_ratio, initial_step)
    dataset_size = len(trajectories)
    if dataset_size == 0:  # nothing to train: no chunks, as in the reference (said once, not silently)
        warnings.warn("create_sft_dataset_iterator() got no trajectories: it yields no chunks", stacklevel=2)
        return
    batches_per_epoch = math.ceil(dataset_size / batch_size)
    total_batches = batches_per_epoch * epochs
    schedule = create_lr_schedule(
        total_batches, peak_lr, schedule_type, warmup_steps=int(total_batches * warmup_ratio)
    )
    items_per_chunk = batch_size * chunk_size
    chunks_per_epoch = math.ceil(dataset_size / items_per_chunk)
    bar = (
        tqdm(initial=initial_step, total=total_batches, desc="SFT Training", unit="step")
        if show_progress
        else None
    )
    try:
        for epoch in range(epochs):
            order = list(trajectories)
            if shuffle:
                random.Random(seed + epoch).shuffle(order)
            for chunk_index in range(chunks_per_epoch):
                start = chunk_index * items_per_chunk
                chunk = order[start : start + items_per_chunk]
                num_batches = math.ceil(len(chunk) / batch_size)
                epoch_step = start // batch_size
                step = epoch * batches_per_epoch + epoch_step
                if step + num_batches <= initial_step:
                    continue
                config = TrainSFTConfig(
                    learning_rate=schedule[step : step + num_batches], batch_size=batch_size
                )
                yield SFTChunk(chunk, config, step, epoch, epoch_step)
                if bar is not None:
                    bar.update(num_batches)
    finally:
        if bar is not None:
            bar.close()


# ---- JSONL files -----------------------------------------------------------------------------------


class SFTFileError(ValueError):
    """A line of an SFT file that cannot be trained; the message names the file, the line and the fix.

    Example:
        try:
            scan_file("data.jsonl")
        except SFTFileError as error:
            print(error)  # names the file, the line and the fix
    """


def _check_jsonl(file_path: str | Path) -> Path:
    path = Path(file_path)
    if not str(path).endswith(".jsonl"):
        raise ValueError(
            f"Only JSONL files are supported. Got: {file_path} (one JSON object per line, named *.jsonl)"
        )
    if not path.is_file():
        raise FileNotFoundError(f"{file_path}: no such file")
    return path


def parse_sft_line(line: str, file_path: str | Path, line_number: int) -> Trajectory:
    """The trajectory of one JSONL line (`{"messages": [...], "tools": [...]}`), with its file and line in
    `metadata` (`source_file`, `source_line`) so later errors can name it.

    Raises SFTFileError naming the file, the line and the fix. A `metadata` object on the line is kept.

    Example:
        >>> line = '{"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]}'
        >>> parse_sft_line(line, "data.jsonl", 1).metadata["source_line"]
        1
    """
    where = f"{file_path}, line {line_number}"
    try:
        data = json.loads(line)
    except json.JSONDecodeError as e:
        raise SFTFileError(
            f"{where}: not valid JSON ({e.msg}, column {e.colno}); write one JSON object per line; "
            f"{SFT_SKIP_HINT}"
        ) from None
    try:
        if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
            raise ValueError('expected a JSON object with a "messages" list (and optionally "tools")')
        tools = data.get("tools")
        if tools is not None and not (isinstance(tools, list) and all(isinstance(t, dict) for t in tools)):
            raise ValueError('"tools" must be a list of tool objects (the OpenAI tools format)')
        validate_sft_messages(data["messages"], "messages")
        metadata: dict[str, Any] = data["metadata"] if isinstance(data.get("metadata"), dict) else {}
        return Trajectory(
            messages_and_choices=data["messages"],
            tools=tools,
            metadata={**metadata, SOURCE_FILE: str(file_path), SOURCE_LINE: line_number},
        )
    except ValueError as e:  # pydantic's ValidationError is a ValueError too
        raise SFTFileError(f"{where}: {e}; {SFT_SKIP_HINT}") from None


@dataclass
class FileScan:
    """What a validating pass over an SFT file found: valid rows and the invalid lines (with why).

    Example:
        scan = scan_file("data.jsonl", skip_invalid=True)
        print(scan.valid_rows, scan.invalid_lines, scan.first_problems)
    """

    path: Path
    valid_rows: int = 0
    invalid_lines: list[int] = field(default_factory=list)
    first_problems: list[str] = field(default_factory=list)

    def report(self) -> str:
        """One line for the user: how many lines were skipped, which, and the first problems."""
        lines = ", ".join(map(str, self.invalid_lines[:10])) + (
            ", ..." if len(self.invalid_lines) > 10 else ""
        )
        return (
            f"skipped {len(self.invalid_lines)} invalid line(s) of {self.path} (lines {lines}): "
            + " | ".join(self.first_problems)
        )


def scan_file(file_path: str | Path, *, skip_invalid: bool = False) -> FileScan:
    """Validate every line of an SFT file (not its token lengths: the trainer checks those).

    Raises SFTFileError at the first invalid line, or counts it when `skip_invalid`.

    Example:
        scan = scan_file("data.jsonl")  # SFTFileError at the first bad line
    """
    path = _check_jsonl(file_path)
    scan = FileScan(path)
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                parse_sft_line(line, file_path, number)
            except SFTFileError as e:
                if not skip_invalid:
                    raise
                scan.invalid_lines.append(number)
                if len(scan.first_problems) < 3:
                    scan.first_problems.append(str(e).removesuffix(f"; {SFT_SKIP_HINT}"))
                continue
            scan.valid_rows += 1
    return scan


def get_file_row_count(file_path: str) -> int:
    """Number of non-empty lines in a JSONL file (the reference's helper; nothing is validated).

    Example:
        rows = get_file_row_count("data.jsonl")
    """
    path = _check_jsonl(file_path)
    with open(path, encoding="utf-8") as f:
        return sum(1 for line in f if line.strip())


def iterate_file(
    file_path: str,
    epochs: int = 1,
    shuffle_buffer_size: int = 10000,
    seed: int = 42,
    initial_skip: int = 0,
    *,
    skip_invalid: bool = False,
) -> Generator[Trajectory, None, None]:
    """Stream trajectories from a JSONL file for `epochs` epochs, shuffled within a buffer.

    Lines fill a buffer of `shuffle_buffer_size`; once it is full each new line evicts a random entry
    (`random.Random(seed + epoch)`), and the rest is shuffled at the end of the epoch. Only the buffer is in
    memory; the same seed gives the same order. `initial_skip` trajectories are skipped (resuming).
    Invalid lines raise SFTFileError naming the line, or are skipped (with a warning) when `skip_invalid`.

    Example:
        for trajectory in iterate_file("data.jsonl", epochs=3):
            ...
    """
    path = _check_jsonl(file_path)
    if shuffle_buffer_size < 1:
        raise ValueError(f"shuffle_buffer_size must be at least 1, got {shuffle_buffer_size}")
    skipped = 0
    for epoch in range(epochs):
        rng = random.Random(seed + epoch)
        buffer: list[Trajectory] = []
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                try:
                    buffer.append(parse_sft_line(line, file_path, number))
                except SFTFileError as e:
                    if not skip_invalid:
                        raise
                    if epoch == 0:
                        logger.warning("skipped invalid line: %s", e)
                    continue
                if len(buffer) >= shuffle_buffer_size:
                    trajectory = buffer.pop(rng.randint(0, len(buffer) - 1))
                    if skipped < initial_skip:
                        skipped += 1
                    else:
                        yield trajectory
        rng.shuffle(buffer)
        for trajectory in buffer:
            if skipped < initial_skip:
                skipped += 1
            else:
                yield trajectory


async def train_sft_from_file(
    model: TrainableModel,
    file_path: str,
    epochs: int = 1,
    batch_size: int = 2,
    peak_lr: float = SFT_PEAK_LEARNING_RATE,
    schedule_type: ScheduleType = "linear",
    warmup_ratio: float = 0.1,
    initial_step: int = 0,
    final_step: int | None = None,
    _config: dict[str, Any] | None = None,
    verbose: bool = False,
    shuffle_buffer_size: int = 10000,
    *,
    skip_invalid: bool = False,
    seed: int = 42,
    assistant_turns: Literal["all", "last"] = "all",
) -> TrainSFTResult:
    """Supervised fine-tuning from a JSONL file, streamed, in one `model.train_sft` call (one checkpoint).

    The file is first read once to validate every line and count the examples (nothing is trained if a line
    is bad, unless `skip_invalid`, which skips and reports them). Batches are global steps over all epochs:
    `ceil(rows * epochs / batch_size)` of them, with the `schedule_type` schedule (warmup
    `int(total * warmup_ratio)` steps) computed over all of them. `initial_step` resumes at that batch (its
    trajectories and learning rates are exactly those the full run would use there); `final_step`
    (exclusive) stops early, e.g. to evaluate between segments. `assistant_turns="last"` trains only each
    conversation's final assistant turn (`TrainSFTConfig.assistant_turns`, openpipe-art 0.5.23's).

    Example:
        await train_sft_from_file(model, "data/train.jsonl", epochs=3, batch_size=4, peak_lr=2e-4)
    """
    _check_run_options(epochs, batch_size, warmup_ratio, initial_step)
    scan = scan_file(file_path, skip_invalid=skip_invalid)
    if scan.invalid_lines:
        message = scan.report()
        warnings.warn(message, stacklevel=2)
        logger.warning(message)
    if scan.valid_rows == 0:
        raise ValueError(
            f"{file_path} has no training examples"
            + (f" ({len(scan.invalid_lines)} invalid line(s) were skipped)" if scan.invalid_lines else "")
            + '; write one {"messages": [...]} object per line, ending with an assistant message'
        )
    total_trajectories = scan.valid_rows * epochs
    total_batches = math.ceil(total_trajectories / batch_size)
    if initial_step >= total_batches:
        raise ValueError(
            f"initial_step={initial_step} is past the end of the run: {file_path} makes {total_batches} "
            f"batches ({scan.valid_rows} examples x {epochs} epoch(s) / batch_size {batch_size}); nothing to train"
        )
    if final_step is not None:
        if final_step <= initial_step:
            raise ValueError(f"final_step={final_step} must be greater than initial_step={initial_step}")
        final_step = min(final_step, total_batches)
    schedule = create_lr_schedule(
        total_batches, peak_lr, schedule_type, warmup_steps=int(total_batches * warmup_ratio)
    )
    learning_rates = schedule[initial_step:final_step]
    if verbose:
        print(
            f"{file_path}: {scan.valid_rows} examples, {epochs} epoch(s), {total_batches} batches of "
            f"{batch_size}; training batches {initial_step}..{initial_step + len(learning_rates) - 1} "
            f"({schedule_type}, peak_lr {peak_lr})"
        )
    trajectories = itertools.islice(
        iterate_file(
            file_path,
            epochs=epochs,
            shuffle_buffer_size=shuffle_buffer_size,
            seed=seed,
            initial_skip=initial_step * batch_size,
            skip_invalid=skip_invalid,
        ),
        len(learning_rates) * batch_size,
    )
    options = {"skip_invalid": skip_invalid, **(_config or {})}
    result = await model.train_sft(
        trajectories,
        TrainSFTConfig(learning_rate=learning_rates, batch_size=batch_size, assistant_turns=assistant_turns),
        _config=options,
        verbose=verbose,
    )
    if scan.invalid_lines:
        result.metrics["data/num_invalid_lines"] = float(len(scan.invalid_lines))
        await model.log(
            None,
            split="train",
            metrics={"data/num_invalid_lines": float(len(scan.invalid_lines))},
            step=result.step,
        )
    return result
