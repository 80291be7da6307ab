"""`art autorl` end to end on a tiny model through the real CLI, server and trainer, with a scripted
generator and judge over HTTP; the self judge (weak, labelled); and what it says when unconfigured."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import pytest
from scripted_llm import ScriptedLLM, ruler_answer, user_text
from typer.testing import CliRunner

from art.cli import app

pytest.importorskip("torch", reason="needs the `local` extra: pip install -e '.[local]'")

SYSTEM_PROMPT = "You answer with one digit. Reply to the user's message with a single digit and nothing else."


def generator(body: dict) -> str:
    text = user_text(body)
    if '"system_prompt"' in text:
        return json.dumps({"system_prompt": SYSTEM_PROMPT})
    return json.dumps({"inputs": [{"input": f"Pick a digit for item {i}"} for i in range(12)]})


def run(args: list[str]) -> object:
    return CliRunner().invoke(app, ["autorl", *args])


@pytest.mark.slow
def test_autorl_two_steps_on_a_tiny_model(
    tiny_model_path: Path, tmp_path: Path, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm.on("gen", generator)
    llm.on("judge", lambda body: ruler_answer(body, lambda block: (zlib.crc32(block.encode()) % 1000) / 1000))
    monkeypatch.setenv("ART_GENERATOR_BASE_URL", llm.base_url)  # options may come from the environment
    result = run([
        "Answer with a single digit.", "--base-model", str(tiny_model_path), "--base-path", str(tmp_path),
        "--generator", "gen", "--judge", "judge", "--judge-base-url", llm.base_url,
        "--num-train", "4", "--num-val", "2", "--steps", "2", "--groups-per-step", "2", "--rollouts-per-group", "2",
        "--learning-rate", "1e-3", "--max-tokens", "8",
    ])  # fmt: skip
    out = result.output  # type: ignore[attr-defined]
    assert result.exit_code == 0, out + repr(result.exception)  # type: ignore[attr-defined]
    assert (
        f"system prompt: {SYSTEM_PROMPT}" in out
        and "trained better on" in out
        and "held-out inputs (2 judged)" in out
    )

    root = tmp_path / "autorl" / "models" / "autorl"
    state = json.loads((root / "autorl.json").read_text())
    assert len(state["train_inputs"]) == 4 and len(state["val_inputs"]) == 2
    assert not set(state["train_inputs"]) & set(state["val_inputs"])
    history = [json.loads(line) for line in (root / "history.jsonl").read_text().splitlines()]
    assert [e["step"] for e in history if "train/reward" in e] == [1, 2]
    val = [e for e in history if "val/win_rate" in e]
    assert [e["step"] for e in val] == [2] and {"val/reward", "val/base_reward"} <= set(val[0])
    assert (root / "plots" / "reward.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Rollouts used the drafted system prompt; held-out inputs were never trained on.
    trained_on = (root / "trajectories" / "train" / "0001.jsonl").read_text() + (
        root / "trajectories" / "train" / "0002.jsonl"
    ).read_text()
    assert SYSTEM_PROMPT in trained_on and not any(v in trained_on for v in state["val_inputs"])

    # A second run of the same model and task reuses the saved inputs (no new generator request).
    before = len(llm.requests_for("gen"))
    again = run([
        "Answer with a single digit.", "--base-model", str(tiny_model_path), "--base-path", str(tmp_path),
        "--generator", "gen", "--judge", "judge", "--judge-base-url", llm.base_url,
        "--num-train", "4", "--num-val", "2", "--steps", "1", "--groups-per-step", "1", "--rollouts-per-group", "2", "--max-tokens", "8",
    ])  # fmt: skip
    assert again.exit_code == 0, again.output  # type: ignore[attr-defined]
    assert "reusing the inputs" in again.output and len(llm.requests_for("gen")) == before  # type: ignore[attr-defined]


def test_self_judge_is_a_labelled_plumbing_run(
    tiny_model_path: Path, tmp_path: Path, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    import art.recipes.ruler_loop.endpoints

    # The tiny model never closes the JSON it is asked for: let each of its judge answers stop early.
    monkeypatch.setattr(art.recipes.ruler_loop.endpoints, "SELF_MAX_TOKENS", 24)
    llm.on("gen", generator)
    result = run([
        "Answer with a single digit.", "--base-model", str(tiny_model_path), "--base-path", str(tmp_path),
        "--generator", "gen", "--generator-base-url", llm.base_url, "--judge", "self",
        "--num-train", "2", "--num-val", "1", "--steps", "1", "--groups-per-step", "1", "--rollouts-per-group", "2", "--max-tokens", "8",
    ])  # fmt: skip
    out = result.output  # type: ignore[attr-defined]
    assert result.exit_code == 0, out + repr(result.exception)  # type: ignore[attr-defined]
    assert "a plumbing run" in out and "judged by the base model itself" in out
    # A random tiny model cannot write the judge's JSON: the step is skipped and the comparison says so.
    assert "scored no group: no training step" in out
    assert "the judge scored none of them" in out


def test_unconfigured_or_empty_input_says_what_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ART_GENERATOR", "ART_JUDGE", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    result = run(["Fix grammar."])
    assert result.exit_code == 2  # type: ignore[attr-defined]
    out = result.output  # type: ignore[attr-defined]
    assert "no generator is configured" in out and "--generator-base-url" in out and "ART_GENERATOR" in out
    assert "--generator self" in out
    result = run(["Fix grammar.", "--generator", "g", "--generator-base-url", "http://127.0.0.1:9/v1"])
    assert result.exit_code == 2 and "no judge is configured" in result.output  # type: ignore[attr-defined]
    result = run(["Fix grammar.", "--generator", "openai/gpt-4.1-mini", "--judge", "self"])
    assert result.exit_code == 2 and "needs OPENAI_API_KEY" in result.output  # type: ignore[attr-defined]
    result = run(["   "])
    assert result.exit_code == 2 and "task description is empty" in result.output  # type: ignore[attr-defined]
