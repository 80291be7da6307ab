"""A model used from two event loops, one after the other (two `asyncio.run`s, as scripts and notebooks do):
registering again with a new backend moves the model to the new endpoint, its chats work, and nothing of
the first loop's client fails later ("Task exception was never retrieved ... Event loop is closed")."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="needs the `local` extra: pip install -e '.[local]'")

SCRIPT = textwrap.dedent(
    """
    import asyncio, gc, sys
    import art
    from art.local import LocalBackend

    model = art.TrainableModel(name="m", project="p", base_model=sys.argv[1], base_path=sys.argv[2])

    async def run(n):
        backend = LocalBackend(progress=False)
        await model.register(backend)
        reply = await model.openai_client().chat.completions.create(
            model=model.get_inference_name(), messages=[{"role": "user", "content": "hi"}], max_tokens=2
        )
        assert reply.choices[0].message is not None
        await backend.close()
        gc.collect()  # a client dropped now closes itself on this loop, if it does
        await asyncio.sleep(0.2)
        print(f"run {n} chatted at {model.inference_base_url}", flush=True)

    asyncio.run(run(1))
    asyncio.run(run(2))
    gc.collect()
    """
)


def test_two_event_loops_one_after_the_other(tiny_model_path: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tiny_model_path), str(tmp_path / "art")],
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ | {"HF_HUB_OFFLINE": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith("run ")]
    assert len(lines) == 2 and lines[0] != lines[1], lines  # the second backend's own port
    assert "Task exception was never retrieved" not in done.stderr, done.stderr[-3000:]
    assert "Event loop is closed" not in done.stderr, done.stderr[-3000:]
