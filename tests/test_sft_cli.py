"""`art sft FILE` end to end, as a subprocess: a tiny model fine-tuned from a JSONL file, and bad files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="needs the `local` extra: pip install -e '.[local]'")


def art_command(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # ART_TRAIN_COMPILE=0: the command is under test, not the compiled training kernels (their own tests).
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "ART_TRAIN_COMPILE": "0"}
    return subprocess.run(
        [sys.executable, "-m", "art", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900
    )


def row(question: str, answer: str) -> str:
    return json.dumps(
        {"messages": [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]}
    )


def test_art_sft_trains_a_checkpoint_from_a_file(tiny_model_path: Path, tmp_path: Path) -> None:
    data = tmp_path / "data.jsonl"
    base = tmp_path / "record"
    args = ["--name", "cli", "--base-model", str(tiny_model_path), "--base-path", str(base)]
    # A bad line: exit status 2, the file, the line and the fix, before any model is loaded or recorded.
    data.write_text(
        row("q", "a") + "\n" + json.dumps({"messages": [{"role": "user", "content": "q"}]}) + "\n"
    )
    bad = art_command("sft", str(data), *args, cwd=tmp_path)
    assert bad.returncode == 2, bad.stdout + bad.stderr
    assert "data.jsonl, line 2: messages[0].role is 'user'" in bad.stderr
    assert "--skip-invalid" in bad.stderr and "Traceback" not in bad.stderr
    assert not base.exists()

    data.write_text("\n".join(row(f"Question {i}?", str(i % 10)) for i in range(6)) + "\n")
    options = ["--epochs", "1", "--batch-size", "3", "--peak-lr", "1e-2", "--schedule-type", "cosine"]
    result = art_command("sft", str(data), *args, *options, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "step 1 (cli@1)" in result.stdout and "over 2 batches" in result.stdout, result.stdout
    root = base / "sft" / "models" / "cli"
    assert (root / "checkpoints" / "0001" / "adapter_model.safetensors").is_file()
    history = [json.loads(line) for line in (root / "history.jsonl").read_text().splitlines()]
    assert history[-1]["step"] == 1 and history[-1]["data/step_num_gradient_steps"] == 2
    assert history[-1]["data/step_num_trajectories"] == 6
