"""MCP-RL end to end on a tiny model: the shipped server as real subprocesses, our engine as the agent,
a scripted judge over HTTP, two GRPO steps, then trained vs base on held-out tasks; history and plot."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import pytest
from scripted_llm import ScriptedLLM, ruler_answer

pytest.importorskip("torch", reason="needs the `local` extra: pip install -e '.[local]'")


def varied_score(block: str) -> float:
    """A deterministic judge whose scores differ between different trajectories."""
    return (zlib.crc32(block.encode()) % 1000) / 1000


@pytest.fixture(scope="module")
def long_tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random model with room for the mailbox's tool schemas in its context window."""
    from art.testing.tiny_model import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("tiny-mcp"), max_position_embeddings=8192)


@pytest.mark.slow
async def test_mcp_rl_two_steps_on_a_tiny_model(
    long_tiny_model: Path, tmp_path: Path, llm: ScriptedLLM, caplog: pytest.LogCaptureFixture
) -> None:
    from art.examples.mcp_rl.train import McpRlConfig, run_mcp_rl

    from art.local import LocalBackend

    llm.on("judge", lambda body: ruler_answer(body, varied_score))
    config = McpRlConfig(
        base_model=str(long_tiny_model),
        base_path=str(tmp_path),
        judge="judge",
        judge_base_url=llm.base_url,
        judge_api_key="k",
        num_train=2,
        num_val=1,
        steps=2,
        groups_per_step=1,
        rollouts_per_group=3,  # a step is skipped only if all three rollouts are the same
        max_turns=2,
        # Room for a tool call's arguments: at 16 tokens the constrained call is cut inside its fixed
        # prefix, so both rollouts of a group could be the same tool name and nothing else (no step trains).
        max_tokens=64,
        learning_rate=1e-3,
    )
    lines: list[str] = []
    async with LocalBackend(max_num_seqs=8, progress=False) as backend:
        with caplog.at_level("WARNING", logger="art.rewards"):
            result = await run_mcp_rl(config, backend=backend, echo=lines.append)
    out = "\n".join(lines)
    assert result.final_step == 2 and result.steps_trained == 2 and result.steps_skipped == 0, out
    final = result.final
    assert final is not None and final.step == 2 and final.judged == 1, out
    assert 0 <= final.trained_score <= 1 and 0 <= final.base_score <= 1 and 0 <= final.win_rate <= 1
    assert "trained better on" in out

    root = tmp_path / "mcp-rl" / "models" / "mailbox-agent"
    history = [json.loads(line) for line in (root / "history.jsonl").read_text().splitlines()]
    train_steps = [e["step"] for e in history if "train/reward" in e]
    assert train_steps == [1, 2]
    val = [e for e in history if "val/win_rate" in e]
    assert [e["step"] for e in val] == [2] and "val/base_reward" in val[0] and "val/reward" in val[0]
    assert (root / "plots" / "reward.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # The rollouts really ran against the MCP server through our engine: tools listed, choices sampled.
    lines_ = (root / "trajectories" / "train" / "0001.jsonl").read_text().splitlines()
    groups = [json.loads(line) for line in lines_]
    trajectory = groups[0]["trajectories"][0]
    names = {t["function"]["name"] for t in trajectory["tools"]}
    assert {"search_emails", "read_email", "move_email", "complete_task"} <= names
    choices = [m for m in trajectory["messages_and_choices"] if "finish_reason" in m]
    assert choices and choices[0]["logprobs"]["content"], "a sampled, trainable turn"
    assert trajectory["metrics"]["num_turns"] >= 1 and "ruler_score" in trajectory["metrics"]
    # Each training reward is the judge's score plus the label-free bonus (weight 0.2 by default).
    for group in groups:
        for t in group["trajectories"]:
            metrics = t["metrics"]
            assert 0 <= metrics["shaping_bonus"] <= 0.2
            assert t["reward"] == pytest.approx(metrics["ruler_score"] + metrics["shaping_bonus"])
    # Validation rewards are the judge's alone, and the label-free comparison covers both models.
    val_lines = (root / "trajectories" / "val" / "0002.jsonl").read_text().splitlines()
    for t in json.loads(val_lines[0])["trajectories"]:
        assert "shaping_bonus" not in t["metrics"] and t["reward"] == t["metrics"]["ruler_score"]
    assert {"tool_calls", "tool_errors", "task_completed"} <= set(final.signals)
    assert "held-out, label-free (trained vs base): tasks completed" in out
    # The judge saw the held-out groups with both models in them: one request naming both, or, where the two
    # models answered the held-out input alike (a tiny model after two small steps can), RULER's one request
    # for the single distinct conversation, which it says (seen on an AVX2 host on a second suite run).
    judged = [r for r in llm.requests_for("judge") if '<trajectory id="2">' in r["messages"][1]["content"]]
    assert judged or "RULER: all 2 trajectories are identical" in caplog.text
    val_trajectories = (root / "trajectories" / "val_base" / "0002.jsonl").read_text()
    assert '"policy": "base"' in val_trajectories or '"policy":"base"' in val_trajectories
