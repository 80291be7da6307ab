"""The email agent's train script end to end on a tiny model: SFT warm-up on the expert, two GRPO steps through
the real server and trainer, checkpoints, history and the held-out table."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="needs the `local` extra: pip install -e '.[local]'")

from art.examples.email_agent.rollout import TaskConfig
from art.examples.email_agent.train import TABLE_LEGEND, EmailAgentConfig, run


def test_a_quick_run_with_sft_warmup_trains_and_writes_checkpoints(
    tiny_model_path: Path, tmp_path: Path
) -> None:
    # the tiny model's context is 2,048 tokens: no worked example, two hits per search, two short turns
    task = TaskConfig(few_shot=False, max_results=2, max_turns=2, max_tokens=16)
    config = EmailAgentConfig.quick(
        base_model=str(tiny_model_path), base_path=str(tmp_path), sft_warmup=True, sft_questions=2, task=task
    )
    lines: list[str] = []
    result = asyncio.run(run(config, echo=lines.append))

    assert (result.sft_steps, result.final_step, len(result.steps)) == (1, 3, 2)  # SFT is step 1, RL 2 and 3
    root = tmp_path / "email-agent" / "models" / "email-agent"
    checkpoints = sorted(p.name for p in (root / "checkpoints").iterdir() if p.name.isdigit())
    assert checkpoints[-1] == "0003" and {"0001", "0002"} <= set(checkpoints)
    assert (root / "checkpoints" / "0003" / "adapter_model.safetensors").is_file()
    history = [json.loads(line) for line in (root / "history.jsonl").read_text().splitlines()]
    assert [e["step"] for e in history if "train/reward" in e] == [2, 3]
    assert {e["step"] for e in history if "val/reward" in e} == {0, 3}  # the base model, then the trained one
    assert result.base is not None and result.base.questions == result.trained.questions == 4
    assert result.trained.model == "email-agent@3"
    out = "\n".join(lines)
    assert "Held-out questions (4, the same for both):" in out and TABLE_LEGEND in out
    assert any(line.startswith("SFT on 2 expert episodes x 1: step 1") for line in lines)
    rows = [line for line in out.splitlines() if line.startswith((str(tiny_model_path), "email-agent@3"))]
    assert len(rows) == 2, out
