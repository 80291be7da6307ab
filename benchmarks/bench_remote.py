"""What a step costs through `art serve` + `RemoteBackend` beyond the same step through `LocalBackend`.

    python benchmarks/bench_remote.py            # SmolLM2-135M (the embedded default), 5 measured steps
    python benchmarks/bench_remote.py --quick    # a tiny random model made on the spot: a smoke run

Side by side in one run, on one machine: a `LocalBackend` in this process and an `art serve` subprocess
each serve a model on the same base. Every step, the local model samples the groups once and BOTH backends
train one step on those very groups (the same tokens: the same training work), in alternating order, so
drift of the machine's load hits both. The first step of each backend (compilation, caches) is a warm-up
and not measured.

Per step it prints the client's wall time of `train(...)` for each backend and the service's own step
time (`metrics["time/step_trainer_s"]`, the same lifecycle in both). The remote overhead is what the remote call adds
beyond its service step (gzip, HTTP, validation, the job queue, following events) minus what the local
call adds beyond its own (validation): the cost of being remote, as a share of the local step.
Target: under 5% of the step.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import art
from art.local import LocalBackend
from art.remote import RemoteBackend

PROMPT = [
    {"role": "system", "content": "Answer with one word."},
    {"role": "user", "content": "Name a colour."},
]


def start_server(path: Path) -> tuple[subprocess.Popen[bytes], str, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = path / "serve.out"
    with open(out, "wb") as o, open(path / "serve.err", "wb") as e:
        proc = subprocess.Popen(
            [sys.executable, "-m", "art", "serve", "--port", str(port), "--path", str(path / "server"),
             "--base-model-root", str(path)],  # the tiny model of --quick is made there
            stdout=o, stderr=e, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
    deadline = time.monotonic() + 900
    while not (found := re.findall(r"ART serving at (\S+)", out.read_text())):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"art serve did not start: {(path / 'serve.err').read_text()[-3000:]}")
        time.sleep(0.2)
    return proc, found[0], (path / "server" / ".serve" / "api_key").read_text().strip()


async def sample(
    model: art.TrainableModel, step: int, groups: int, size: int, max_tokens: int
) -> list[art.TrajectoryGroup]:
    async def rollout(g: int, i: int) -> art.Trajectory:
        response = await model.openai_client().chat.completions.create(
            model=model.get_inference_name(), messages=PROMPT, max_tokens=max_tokens, temperature=1.0,
            seed=step * 10_000 + g * 100 + i,  # type: ignore[arg-type]
        )  # fmt: skip
        return art.Trajectory(messages_and_choices=[*PROMPT, response.choices[0]], reward=float(i % 2))

    return await art.gather_trajectory_groups(
        [art.TrajectoryGroup(rollout(g, i) for i in range(size)) for g in range(groups)], pbar_desc=None
    )


async def timed_train(
    backend: art.Backend, model: art.TrainableModel, groups: list[art.TrajectoryGroup], lr: float
) -> tuple[float, float, float, float]:
    """(client wall, service step_s, wall clock at the call, at its return)."""
    started, t = time.time(), time.perf_counter()
    result = await backend.train(model, groups, learning_rate=lr)
    wall = time.perf_counter() - t
    assert result.step > 0 and "time/step_trainer_s" in result.metrics, result
    return wall, float(result.metrics["time/step_trainer_s"]), started, started + wall


async def remote_phases(
    backend: RemoteBackend, model: art.TrainableModel, called: float, returned: float, step_s: float
) -> dict[str, float]:
    """Where a remote step's time beyond the service step went, from the job's record (same machine clock)."""
    [job] = await backend.recent_training_jobs(model, limit=1)
    assert job.started_at is not None and job.finished_at is not None
    return {
        "submit": job.created_at - called,  # validate, encode, gzip, POST, parse and queue on the server
        "queued": job.started_at - job.created_at,
        "job beyond step": (job.finished_at - job.started_at) - step_s,  # records, events
        "notify": returned - job.finished_at,  # the last event reaching the client
    }


async def run(base_model: str, steps: int, groups: int, size: int, max_tokens: int, workdir: Path) -> None:
    proc, url, key = start_server(workdir)
    local_backend = LocalBackend(progress=False)
    remote_backend = RemoteBackend(url, key, progress=False)
    local = art.TrainableModel(
        name="bench-local", project="bench", base_model=base_model, base_path=str(workdir / "local")
    )
    remote = art.TrainableModel(
        name="bench-remote", project="bench", base_model=base_model, base_path=str(workdir / "client")
    )
    try:
        await local.register(local_backend)
        await remote.register(remote_backend)
        rows, phases = [], []
        header = ("step", "first", "local s", "(service)", "remote s", "(service)", "remote extra")
        print("{:>4} {:>6} {:>8} {:>9} {:>9} {:>9} {:>12}".format(*header))
        for step in range(steps + 1):
            await local.get_step()  # `backend.train` leaves the model's step to the caller
            batch = await sample(local, step, groups, size, max_tokens)
            runs = {}
            order = ("local", "remote") if step % 2 == 0 else ("remote", "local")
            for which in order:
                backend, model = (local_backend, local) if which == "local" else (remote_backend, remote)
                runs[which] = await timed_train(backend, model, batch, 1e-5)
            (lw, ls, _, _), (rw, rs, called, returned) = runs["local"], runs["remote"]
            extra = (rw - rs) - (lw - ls)
            tag = " (warm-up)" if step == 0 else ""
            print(
                f"{step:>4} {order[0]:>6} {lw:>8.3f} {ls:>9.3f} {rw:>9.3f} {rs:>9.3f} {extra * 1e3:>10.1f}ms{tag}"
            )
            if step > 0:
                rows.append((lw, ls, rw, rs, extra))
                phases.append(await remote_phases(remote_backend, remote, called, returned, rs))
        local_wall = statistics.median(r[0] for r in rows)
        remote_wall = statistics.median(r[2] for r in rows)
        extra = statistics.median(r[4] for r in rows)
        local_extra = statistics.median(r[0] - r[1] for r in rows)
        remote_extra = statistics.median(r[2] - r[3] for r in rows)
        where = ", ".join(f"{k} {statistics.median(p[k] for p in phases) * 1e3:.1f} ms" for k in phases[0])
        print()
        print(f"model {base_model}, {groups} groups x {size} trajectories, {max_tokens} sampled tokens each, "
              f"{len(rows)} measured steps (medians)")  # fmt: skip
        print(
            f"local step (client wall):  {local_wall:8.3f} s   beyond its service step: {local_extra * 1e3:7.1f} ms"
        )
        print(
            f"remote step (client wall): {remote_wall:8.3f} s   beyond its service step: {remote_extra * 1e3:7.1f} ms"
        )
        print(f"  of which: {where}")
        print(f"remote / local wall:       {remote_wall / local_wall:8.3f}x  (includes the steps' own noise)")
        print(f"remote overhead:           {extra * 1e3:8.1f} ms = {100 * extra / local_wall:.2f}% of the local step "
              "(target < 5%)")  # fmt: skip
    finally:
        await remote_backend.close()
        await local_backend.close()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(120)
        except subprocess.TimeoutExpired:
            proc.kill()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="tiny random model, 2 measured steps")
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--steps", type=int, default=5, help="measured steps (after one warm-up step)")
    parser.add_argument("--groups", type=int, default=4)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=32)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-remote-") as tmp:
        workdir = Path(tmp)
        model = args.model
        steps, groups, size = args.steps, args.groups, args.group_size
        if args.quick:
            from art.testing.tiny_model import make_tiny_model

            # A smoke run: without the trainer's torch.compile, whose first step costs minutes on 2 cores.
            os.environ.setdefault("ART_TRAIN_COMPILE", "0")

            model = str(make_tiny_model(workdir / "tiny"))
            steps, groups, size = 2, 2, 4
        asyncio.run(run(model, steps, groups, size, args.max_tokens, workdir))


if __name__ == "__main__":
    main()
