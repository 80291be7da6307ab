"""vLLM's extra sampling fields and grammars in the torch engine: what is drawn changes, what is reported
(raw logprobs) does not, and rows that ask for nothing are untouched by rows that do."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from test_engine import PROMPT, run  # noqa: E402

from art.chat.grammar import StructuredOutputs  # noqa: E402
from art.engines.base import InvalidRequestError  # noqa: E402


def _raw_logits(engine: Any, ids: list[int]) -> torch.Tensor:
    """[len(ids), V] float32 logits of a separate HF forward pass."""
    with torch.inference_mode():
        return engine.hf_model(torch.tensor([ids])).logits[0].float()


def _penalized_greedy(
    engine: Any, prompt: list[int], steps: int, repetition: float, presence: float, frequency: float
) -> list[int]:
    """Greedy decoding with vLLM's penalties, written out plainly as the reference."""
    out: list[int] = []
    for _ in range(steps):
        logits = _raw_logits(engine, prompt + out)[-1].tolist()
        for token in set(prompt + out):
            x = logits[token]
            logits[token] = x / repetition if x > 0 else x * repetition
        for token in set(out):
            logits[token] -= presence + frequency * out.count(token)
        out.append(max(range(len(logits)), key=logits.__getitem__))
    return out


async def test_penalties_follow_vllms_definition_and_report_raw_logprobs(engine: Any) -> None:
    penalties = dict(repetition_penalty=1.8, presence_penalty=0.7, frequency_penalty=0.4)
    ids, logprobs, _ = await run(
        engine, "tiny", PROMPT, max_tokens=12, temperature=0.0, ignore_eos=True, **penalties
    )
    expected = _penalized_greedy(engine, PROMPT, 12, 1.8, 0.7, 0.4)
    assert ids == expected
    plain, _, _ = await run(engine, "tiny", PROMPT, max_tokens=12, temperature=0.0, ignore_eos=True)
    assert plain != ids  # the penalties changed the reply (else this test proves nothing)
    raw = torch.log_softmax(_raw_logits(engine, PROMPT + ids), -1)[len(PROMPT) - 1 : -1]
    assert logprobs == pytest.approx(
        raw.gather(-1, torch.tensor(ids)[:, None]).squeeze(-1).tolist(), abs=1e-4
    )


async def test_top_k_and_min_p_keep_only_the_likely_tokens(engine: Any) -> None:
    greedy, _, _ = await run(engine, "tiny", PROMPT, max_tokens=8, temperature=0.0, ignore_eos=True)
    assert (await run(engine, "tiny", PROMPT, max_tokens=8, seed=3, top_k=1, ignore_eos=True))[0] == greedy
    assert (await run(engine, "tiny", PROMPT, max_tokens=8, seed=3, min_p=1.0, ignore_eos=True))[0] == greedy
    for seed in range(4):
        ids, _, _ = await run(engine, "tiny", PROMPT, max_tokens=10, seed=seed, temperature=1.5, top_k=3)
        logits = _raw_logits(engine, PROMPT + ids)[len(PROMPT) - 1 :]
        for position, token in enumerate(ids):
            assert token in logits[position].topk(3).indices.tolist()
        ids, _, _ = await run(engine, "tiny", PROMPT, max_tokens=10, seed=seed, temperature=1.5, min_p=0.5)
        probs = torch.softmax(_raw_logits(engine, PROMPT + ids)[len(PROMPT) - 1 :] / 1.5, -1)
        for position, token in enumerate(ids):
            assert probs[position, token] >= 0.5 * probs[position].max() - 1e-6


async def test_logit_bias_forces_or_bans_tokens(engine: Any) -> None:
    ids, _, reason = await run(engine, "tiny", PROMPT, max_tokens=6, seed=1, logit_bias={77: 100.0})
    assert ids == [77] * 6 and reason == "length"
    greedy, _, _ = await run(engine, "tiny", PROMPT, max_tokens=1, temperature=0.0)
    banned, _, _ = await run(
        engine, "tiny", PROMPT, max_tokens=1, temperature=0.0, logit_bias={greedy[0]: -100.0}
    )
    assert banned != greedy


async def test_stop_token_ids_end_the_sequence_on_that_token(engine: Any) -> None:
    ids, _, reason = await run(
        engine, "tiny", PROMPT, max_tokens=20, seed=1, logit_bias={77: 100.0}, stop_token_ids=(77,)
    )
    assert ids == [77] and reason == "stop"


async def test_plain_rows_are_untouched_by_processed_rows_in_their_batch(engine: Any) -> None:
    plain = [dict(max_tokens=10, seed=s, temperature=[1.0, 0.0, 0.8][s % 3]) for s in range(6)]
    processed = [
        dict(max_tokens=10, seed=s, top_k=4, repetition_penalty=1.3, frequency_penalty=0.2) for s in range(4)
    ] + [dict(max_tokens=10, seed=9, structured_outputs=StructuredOutputs(regex="[0-9]{3,8}"))]
    solo = [await run(engine, "tiny", PROMPT, **k) for k in plain + processed]
    together = await asyncio.gather(*(run(engine, "tiny", PROMPT, **k) for k in plain + processed))
    for s, t in zip(solo, together, strict=True):
        assert s[0] == t[0] and s[1] == pytest.approx(t[1], abs=1e-4)
    text = engine.tokenizer.decode(together[-1][0], skip_special_tokens=True)
    assert text.isdigit() and 3 <= len(text) <= 8


class _Stuck:
    """A matcher that allows no token at all (as one in an error state would)."""

    error = "stuck on purpose"

    def fill_bitmask(self, bitmask: Any, row: int) -> None:
        bitmask[row].zero_()

    def consume(self, token_id: int) -> bool:
        return False


async def test_a_grammar_that_allows_nothing_ends_its_sequence(engine: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(engine.grammars, "matcher", lambda constraint: _Stuck())
    ids, _, reason = await run(
        engine, "tiny", PROMPT, max_tokens=20, seed=1, structured_outputs=StructuredOutputs(json_object=True)
    )
    assert reason == "stop" and len(ids) == 1 and ids[0] in engine._scheduler._stop_ids.tolist()


async def test_token_ids_outside_the_vocabulary_are_refused(engine: Any) -> None:
    with pytest.raises(InvalidRequestError, match="stop_token_ids"):
        await run(engine, "tiny", PROMPT, stop_token_ids=(10**6,))
    with pytest.raises(InvalidRequestError, match="logit_bias"):
        await run(engine, "tiny", PROMPT, logit_bias={10**6: 1.0})
    with pytest.raises(InvalidRequestError, match="structured outputs"):
        await run(engine, "tiny", PROMPT, structured_outputs=StructuredOutputs(regex="(unclosed"))
