"""The training loop the fault suite breaks: rollouts through the real server, then `model.train`.

Used in-process by the fault tests and as a child process that a test kills with SIGKILL at a random
moment, or that exits abruptly (`os._exit`: no cleanup, as a kill) at a named point of a step. Children
are forked from a multiprocessing forkserver that imported torch, transformers and ART once (a fresh
interpreter spends ~9 s of CPU on imports alone). A child appends one JSON line per event to its events
file (flushed), so the parent knows where it was when it died, what the restart resumed from, and that
the next step trained. `python faults_loop.py --help` runs one child by hand, to replay a failure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import art
from art.types import RuntimeOptions

PROMPT = [{"role": "user", "content": "Reply with digits."}]
CRASH_EXIT = 86  # the exit code of an injected crash (a kill -9 gives -9)


async def rollout(model: art.TrainableModel, seed: int, reward: float) -> art.Trajectory:
    response = await model.openai_client().chat.completions.create(
        model=model.get_inference_name(),
        messages=PROMPT,  # type: ignore[arg-type]
        max_tokens=6,
        temperature=1.0,
        seed=seed,  # type: ignore[arg-type]
    )
    return art.Trajectory(messages_and_choices=[*PROMPT, response.choices[0]], reward=reward)


async def play_step(
    model: art.TrainableModel, step: int, groups: int = 2, size: int = 4
) -> list[art.TrajectoryGroup]:
    """Rollouts for one step: seeded by the step, and every group has something to learn (rewards differ)."""
    return await art.gather_trajectory_groups(
        [
            art.TrajectoryGroup(
                rollout(model, seed=step * 1000 + g * 100 + i, reward=float(i == 0)) for i in range(size)
            )
            for g in range(groups)
        ],
        pbar_desc=None,
    )


def make_model(base_path: str | Path, base_model: str | Path) -> art.TrainableModel:
    return art.TrainableModel(
        name="loop", project="faults", base_model=str(base_model), base_path=str(base_path)
    )


# ---- the child process -----------------------------------------------------------------------------
EVENTS: list[Any] = []  # the child's open events file


def emit(event: str, **fields: Any) -> None:
    line = json.dumps({"event": event, "t": time.monotonic(), "cpu": time.process_time(), **fields}) + "\n"
    for out in EVENTS or [sys.stdout]:
        out.write(line)
        out.flush()


def crash(point: str) -> None:
    emit("crash", point=point)
    os._exit(CRASH_EXIT)  # no cleanup, no flush of anything else: what a kill leaves


def install_crash(point: str, when: Callable[[], bool]) -> None:
    """Make the process die at `point` of a step, when `when()` says so (e.g. during the second step)."""
    import art.record.storage as storage
    from art.training.trainer import Trainer

    if point == "after-optimizer-step":  # trained in memory, nothing saved
        real_train_step = Trainer.train_step

        def train_step(self: Trainer, *args: Any, **kwargs: Any) -> Any:
            report = real_train_step(self, *args, **kwargs)
            if when():
                crash(point)
            return report

        Trainer.train_step = train_step  # type: ignore[method-assign]
    elif point == "before-manifest":  # the checkpoint's files are written, its manifest is not
        real_atomic = storage.atomic_write_text

        def atomic_write_text(path: Path, text: str) -> None:
            if path.name == storage.CHECKPOINT_MANIFEST and when():
                crash(point)
            real_atomic(path, text)

        storage.atomic_write_text = atomic_write_text  # type: ignore[assignment]
    elif point == "before-rename":  # the manifest is written, the folder still has its temporary name
        real_replace = os.replace

        def replace(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
            if Path(src).name.startswith(".tmp-") and Path(dst).parent.name == "checkpoints" and when():
                crash(point)
            real_replace(src, dst, *args, **kwargs)

        os.replace = replace  # type: ignore[assignment]
    elif point == "after-commit":  # committed, before the engine loaded it and the canary ran
        real_commit = storage.ModelStorage.commit_checkpoint

        def commit_checkpoint(self: storage.ModelStorage, *args: Any, **kwargs: Any) -> Path:
            final = real_commit(self, *args, **kwargs)
            if when():
                crash(point)
            return final

        storage.ModelStorage.commit_checkpoint = commit_checkpoint  # type: ignore[method-assign]
    elif point == "after-commit-before-log":  # the step is published, model.log has not run
        real_log = art.TrainableModel.log

        async def log(self: art.TrainableModel, *args: Any, **kwargs: Any) -> None:
            if kwargs.get("split") == "train" and when():
                crash(point)
            await real_log(self, *args, **kwargs)

        art.TrainableModel.log = log  # type: ignore[method-assign]
    elif point in ("mid-trajectory-write", "mid-history-write"):  # half the write reaches the disk
        real_append = storage.append_jsonl

        def is_target(path: Path) -> bool:
            if point == "mid-history-write":
                return path.name == "history.jsonl"
            return "trajectories" in path.parts  # the record's files, not the checkpoint's copy

        def append_jsonl(path: Path, lines: Any) -> None:
            if is_target(path) and when():
                data = "".join(line + "\n" for line in lines).encode()
                with open(path, "ab") as f:
                    f.write(data[: len(data) // 2])
                    f.flush()
                    os.fsync(f.fileno())
                crash(point)
            real_append(path, lines)

        storage.append_jsonl = append_jsonl  # type: ignore[assignment]
    else:
        raise SystemExit(f"unknown crash point {point!r}")


async def child(args: argparse.Namespace) -> None:
    from art.local import LocalBackend
    from art.record.storage import read_history_file

    model = make_model(args.base_path, args.base_model)
    trained = {"n": 0, "in_step": False}  # steps this process trained, and whether one is under way
    if args.crash_at:
        install_crash(args.crash_at, lambda: trained["in_step"] and trained["n"] + 1 == args.crash_on)
    storage = model.storage
    logged = {
        e["step"] for e in read_history_file(storage.history_path) if any(k.startswith("train/") for k in e)
    }
    emit(
        "start",
        checkpoints=storage.checkpoint_steps(),
        unrecorded=[s for s in storage.checkpoint_steps() if s > max(logged, default=0)],
    )
    options = RuntimeOptions(dtype="float32", train_compile=False, engine_compile="off")
    async with LocalBackend(progress=False, options=options) as backend:
        await model.register(backend)
        step = await model.get_step()
        emit(
            "registered",
            step=step,
            checkpoints=storage.checkpoint_steps(),
            rejected=[p.name for p in storage.rejected_checkpoints()],
        )
        for _ in range(args.steps):
            emit("rollouts", step=step)
            groups = await play_step(model, step)
            trained["in_step"] = True
            emit("train", step=step + 1)
            result = await model.train(groups, config=art.TrainConfig(learning_rate=1e-2))
            trained["in_step"] = False
            trained["n"] += 1
            step = result.step
            emit("trained", step=step)
    emit("done", step=step)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--base-path", required=True)
    p.add_argument("--base-model", required=True)
    p.add_argument("--steps", type=int, default=1)
    p.add_argument("--crash-at", default=None, help="a named point of a step (see install_crash)")
    p.add_argument("--crash-on", type=int, default=2, help="crash during the N-th step this process trains")
    return p


def child_main(argv: list[str], events_path: str) -> None:
    """A forked child's entry point: the loop, with its events appended to `events_path`."""
    EVENTS.append(open(events_path, "a", encoding="utf-8"))  # noqa: SIM115 - open for the process's life
    asyncio.run(child(parser().parse_args(argv)))


def main() -> None:
    asyncio.run(child(parser().parse_args()))


if __name__ == "__main__":
    sys.exit(main())
