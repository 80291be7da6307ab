"""tinker-cookbook 0.6.1's basic recipes, unchanged, against `art serve` on the tiny model (issue 57 item 2):
`sl_basic` (supervised, on a conversations file) with its loss falling, and `rl_basic` (GSM8K-style RL with
`importance_sampling`) to the end, both through `TINKER_BASE_URL` / `TINKER_API_KEY` only.

The recipes accept only model names in the cookbook's table, so the server serves the tiny model as
`Qwen/Qwen3-4B-Instruct-2507` (`art serve --tinker-model`, tests/hub/conftest.py); the cookbook reads that
name's tokenizer from a folder of that name in its working directory, and GSM8K from `./openai/gsm8k`
(offline, both hand-made here). The tiny random model cannot do arithmetic: rl_basic's reward is not
expected to rise here, only the recipe to run through (its metrics and checkpoints written)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="needs the `local` extra: pip install -e '.[local]'")
pytest.importorskip("tinker", reason="needs the `dev` extra (tinker==0.38): pip install -e '.[dev]'")
pytest.importorskip("tinker_cookbook", reason="needs tinker-cookbook 0.6.1: bash tests/install_extras.sh")

from helpers_serve import ServeProcess
from helpers_tinker import COOKBOOK_MODEL

pytestmark = pytest.mark.slow
CONVERSATION = {"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]}


def workdir(tmp_path: Path, tiny_model_path: Path) -> Path:
    """A working directory holding what the recipes read offline: the tokenizer under the model's name, and
    GSM8K as the `datasets` library finds a hub id in the current directory."""
    tokenizer = tmp_path / COOKBOOK_MODEL
    tokenizer.mkdir(parents=True)
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        shutil.copy(tiny_model_path / name, tokenizer / name)
    (tmp_path / "conversations.jsonl").write_text("".join(json.dumps(CONVERSATION) + "\n" for _ in range(16)))
    gsm8k = tmp_path / "openai" / "gsm8k"
    (gsm8k / "main").mkdir(parents=True)
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [
        {"question": f"What is {a} plus {b}?", "answer": f"{a + b}\n#### {a + b}"}
        for a, b in [(1, 2), (3, 4)] * 4
    ]
    for split in ("train", "test"):
        pq.write_table(pa.Table.from_pylist(rows), gsm8k / "main" / f"{split}-00000-of-00001.parquet")
    (gsm8k / "README.md").write_text(
        "---\nconfigs:\n- config_name: main\n  data_files:\n  - split: train\n    path: main/train-*\n"
        "  - split: test\n    path: main/test-*\n---\n"
    )
    return tmp_path


def recipe(served: ServeProcess, cwd: Path, name: str, *args: str) -> list[dict[str, float]]:
    """Run `python -m tinker_cookbook.recipes.NAME ARGS` against the server; its metrics.jsonl rows."""
    env = {**os.environ, "TINKER_BASE_URL": served.url, "TINKER_API_KEY": served.key, "TINKER_TELEMETRY": "0",
           "HF_DATASETS_OFFLINE": "1"}  # fmt: skip
    log = cwd / "logs" / name
    done = subprocess.run(
        [sys.executable, "-m", f"tinker_cookbook.recipes.{name}", f"model_name={COOKBOOK_MODEL}",
         f"log_path={log}", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert "final" in (log / "checkpoints.jsonl").read_text()
    return [json.loads(line) for line in (log / "metrics.jsonl").read_text().splitlines()]


def test_sl_basic_and_rl_basic_run_unchanged(
    tinker_served: ServeProcess, tiny_model_path: Path, tmp_path: Path
) -> None:
    cwd = workdir(tmp_path, tiny_model_path)
    common = "dataset_builder.common_config"
    sl = recipe(
        tinker_served, cwd, "sl_basic", "max_steps=4", "eval_every=0", "learning_rate=0.02",
        "dataset_builder=tinker_cookbook.supervised.data:FromConversationFileBuilder",
        f"dataset_builder.file_path={cwd / 'conversations.jsonl'}",
        f"{common}.model_name_for_tokenizer={COOKBOOK_MODEL}", f"{common}.renderer_name=qwen3_instruct",
        f"{common}.batch_size=4", f"{common}.max_length=64",
    )  # fmt: skip
    nll = [row["train_mean_nll"] for row in sl]
    assert len(nll) == 4 and nll[-1] < nll[0], nll  # the same conversation, learned
    rl = recipe(
        tinker_served, cwd, "rl_basic", "max_steps=2", "max_tokens=8",
        "dataset_builder=tinker_cookbook.recipes.math_rl.math_env:Gsm8kDatasetBuilder",
        "dataset_builder.batch_size=2", "dataset_builder.group_size=2",
        f"dataset_builder.model_name_for_tokenizer={COOKBOOK_MODEL}", "dataset_builder.renderer_name=qwen3_instruct",
    )  # fmt: skip
    rewards = [row["env/all/reward/total"] for row in rl if "env/all/reward/total" in row]
    assert len(rewards) == 2, rl  # a row per step (and one more, the run's end)
