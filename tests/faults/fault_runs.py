"""The parent's side of the fault suite: start loop children, kill them, read their events, check the record.

`record_problems(storage)` is the proof that nothing was lost: every committed checkpoint verifies against
its checksums, steps run 0..N without a gap, and every trained step has, in the record, each group its
checkpoint trained on (exactly once) and a `train/` history line.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import time
import warnings
from dataclasses import dataclass, field
from multiprocessing.context import ForkServerContext
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import faults_loop

from art.record.storage import ModelStorage, group_fingerprint, read_history_file, read_jsonl

# Imported once by the forkserver, so a child starts in well under a second instead of ~9 s of CPU.
PRELOAD = [
    "torch",
    "transformers",
    "peft",
    "fastapi",
    "uvicorn",
    "art.local",
    "art.service.service",
    "art.openai_server.http",
    "art.training.trainer",
    "art.engines.torch.torch_engine",
]
_context: ForkServerContext | None = None


def _forkserver() -> ForkServerContext:
    global _context
    if _context is None:
        _context = multiprocessing.get_context("forkserver")
        _context.set_forkserver_preload(PRELOAD)
    return _context


@dataclass
class Child:
    """One run of the loop in a child process, and the events it wrote."""

    process: BaseProcess
    events_path: Path
    argv: list[str]
    seen: list[dict[str, Any]] = field(default_factory=list)

    def events(self) -> list[dict[str, Any]]:
        lines = self.events_path.read_text().splitlines() if self.events_path.exists() else []
        out = []
        for line in lines:
            with contextlib.suppress(json.JSONDecodeError):  # the line a kill tore
                out.append(json.loads(line))
        self.seen = out
        return out

    def wait_for(self, event: str, timeout: float = 300) -> dict[str, Any]:
        """The first event named `event` (waiting for it); AssertionError if the child ended without it."""
        deadline = time.monotonic() + timeout
        while True:
            for e in self.events():
                if e["event"] == event:
                    return e
            if not self.process.is_alive():
                self.process.join()
                raise AssertionError(
                    f"child {self.argv} ended (exit {self.process.exitcode}) without {event!r}: {self.seen}"
                )
            if time.monotonic() > deadline:
                self.kill()
                raise AssertionError(f"child {self.argv}: no {event!r} within {timeout} s: {self.seen}")
            time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL: no cleanup, no flush, nothing but what already reached the disk."""
        self.process.kill()
        self.process.join()

    def join(self, timeout: float = 300) -> int:
        self.process.join(timeout)
        if self.process.is_alive():
            self.kill()
            raise AssertionError(f"child {self.argv} did not finish within {timeout} s: {self.events()}")
        self.events()
        assert self.process.exitcode is not None
        return self.process.exitcode


def stop_forkserver() -> None:
    """Stop the forkserver and wait for it (its children's CPU time then counts in this process's)."""
    global _context
    if _context is not None:
        from multiprocessing import forkserver

        forkserver._forkserver._stop()  # type: ignore[attr-defined]
        _context = None


def children_cpu(children: list[Child]) -> float:
    """CPU seconds the children had used at their last event (a killed child's last moments are not counted)."""
    return sum(c.seen[-1]["cpu"] for c in children if c.seen)


def start_child(run_dir: Path, base_path: Path, base_model: Path, *args: str) -> Child:
    """Fork a child running `faults_loop.child` with `args` (e.g. "--steps", "2", "--crash-at", ...)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    events_path = run_dir / f"events-{time.monotonic_ns()}.jsonl"
    argv = ["--base-path", str(base_path), "--base-model", str(base_model), *args]
    process = _forkserver().Process(target=faults_loop.child_main, args=(argv, str(events_path)))
    process.start()
    return Child(process, events_path, argv)


def record_problems(storage: ModelStorage, up_to: int | None = None) -> list[str]:
    """What the record of steps <= `up_to` (default: all) lacks or holds twice (empty: nothing was lost).
    Torn lines are skipped quietly (a child may be writing the next step meanwhile)."""
    problems: list[str] = []
    steps = [s for s in storage.checkpoint_steps() if up_to is None or s <= up_to]
    if steps != list(range(len(steps))):
        problems.append(f"checkpoint steps are not 0..N: {steps}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        history = read_history_file(storage.history_path)
        trained_lines = {e["step"] for e in history if any(k.startswith("train/") for k in e)}
        for step in steps:
            try:
                storage.verify_checkpoint(step)
            except ValueError as e:
                problems.append(str(e))
            if step == 0:
                continue
            trained = [group_fingerprint(d) for _, d in read_jsonl(storage.checkpoint_groups_path(step))]
            path = storage.trajectories_path("train", step)
            recorded = [group_fingerprint(d) for _, d in read_jsonl(path)] if path.exists() else []
            if missing := set(trained) - set(recorded):
                problems.append(
                    f"step {step}: {len(missing)} of its {len(trained)} groups are not in the record"
                )
            if twice := {f for f in recorded if recorded.count(f) > 1}:
                problems.append(f"step {step}: {len(twice)} group(s) recorded more than once")
            if step not in trained_lines:
                problems.append(f"step {step}: no train/ line in history.jsonl")
    return problems


def describe(events: list[dict[str, Any]]) -> str:
    """Where a child was when it died: its last event and how long before the end it came."""
    if not events:
        return "before its first event"
    last = events[-1]
    return f"after {last['event']!r}" + (f" of step {last['step']}" if "step" in last else "")
