"""The canary's decision on measured vectors: kernel noise passes, a wrong adapter fails, and what cannot be
resolved is held to the plain tolerance (`art.service.canary`; the real engines are in test_canary_engines.py
and tests/engines/vllm/test_vllm_canary.py)."""

from __future__ import annotations

import math
import random

import pytest

from art.service.canary import (
    BASE_DISAGREEMENT,
    MAX_OFF,
    CanaryMismatch,
    NoiseFloor,
    check,
    dtype_floor,
    probe_tokens,
)

N = 200  # tokens in the probe (SmolLM2's tokenizer gives ~200 for CANARY_PROBE)


def noise(scale: float, seed: int) -> list[float]:
    """bf16-like kernel noise: mostly small, a few tokens far off (as vLLM vs the trainer, measured)."""
    rng = random.Random(seed)
    return [rng.gauss(0, scale) * (4 if rng.random() < 0.05 else 1) for _ in range(N)]


def setup(effect: float, noise_scale: float) -> tuple[NoiseFloor, list[float], list[float], list[float]]:
    """(noise floor, T0, T_prev, T): base logprobs, then two steps each moving them by ~`effect` / 2."""
    rng = random.Random(1)
    t0 = [-abs(rng.gauss(2, 2)) for _ in range(N)]
    e0 = [t + n for t, n in zip(t0, noise(noise_scale, 2), strict=True)]
    step1 = [rng.gauss(0, effect / 2) for _ in range(N)]
    step2 = [rng.gauss(0, effect / 2) for _ in range(N)]
    prev = [t + a for t, a in zip(t0, step1, strict=True)]
    now = [p + b for p, b in zip(prev, step2, strict=True)]
    return NoiseFloor.measure(e0, t0), t0, prev, now


def served(values: list[float], noise_scale: float, seed: int = 3) -> list[float]:
    return [v + n for v, n in zip(values, noise(noise_scale, seed), strict=True)]


@pytest.mark.parametrize(("dtype", "noise_scale"), [("float32", 1e-5), ("bfloat16", 0.05)])
def test_a_correct_adapter_passes_and_each_wrong_one_fails(dtype: str, noise_scale: float) -> None:
    # An adapter moving logprobs by ~0.15 nats per token: about what vLLM's bf16 noise is on the default model.
    floor, t0, prev, now = setup(effect=0.3, noise_scale=noise_scale)
    reading = check(now, [served(now, noise_scale)], floor, compute_dtype=f"torch.{dtype}", previous=prev)
    assert reading.effect_error is not None and abs(reading.effect_error) < 0.2
    assert reading.step_error is not None and abs(reading.step_error) < 0.2
    assert reading.raw > (0.02 if dtype == "bfloat16" else 0)  # the noise is real, and passes

    doubled = [t + 2 * (x - t) for t, x in zip(t0, now, strict=True)]
    wrong = {
        "zeroed": (served(t0, noise_scale), "looks zeroed or missing"),
        "stale": (served(prev, noise_scale), "looks stale"),
        "x2": (served(doubled, noise_scale), "looks scaled up"),
    }
    for name, (scores, why) in wrong.items():
        with pytest.raises(CanaryMismatch, match=why) as caught:
            check(now, [scores], floor, compute_dtype=dtype, previous=prev)
        assert caught.value.reading is not None, name
        off = caught.value.reading.effect_error if name != "stale" else caught.value.reading.step_error
        assert off is not None and abs(off) > 2 * MAX_OFF * 0.75, (name, off)  # |c| ~ 1: far from the line


def test_a_wrong_adapter_within_the_plain_tolerance_is_still_caught() -> None:
    """Why the check regresses instead of only thresholding mean |served - trained|: in bf16 a zeroed adapter
    whose effect is a few times the kernel noise differs from the trainer by less than any tolerance that
    correct steps pass (3x the noise floor here), yet its error lies along the effect and the fit sees it."""
    floor, t0, prev, now = setup(effect=0.2, noise_scale=0.05)
    correct = check(now, [served(now, 0.05)], floor, compute_dtype="bfloat16", previous=prev)
    with pytest.raises(CanaryMismatch, match="zeroed") as zeroed:
        check(now, [served(t0, 0.05)], floor, compute_dtype="bfloat16", previous=prev)
    reading = zeroed.value.reading
    assert reading is not None and correct.raw < reading.raw < reading.tolerance


def test_an_effect_below_what_the_probe_resolves_is_held_to_the_plain_tolerance() -> None:
    floor, t0, prev, now = setup(effect=0.002, noise_scale=0.05)  # one tiny step: 100x below the noise
    reading = check(now, [served(t0, 0.05)], floor, compute_dtype="bfloat16", previous=prev)  # zeroed
    assert reading.effect_error_se > 0.1 and "canary_effect_error" not in reading.metrics()
    assert reading.raw <= reading.tolerance == pytest.approx(max(0.05, 3 * floor.mean_abs))
    with pytest.raises(CanaryMismatch, match="differ from the trainer's by"):
        check(now, [[x - 1.0 for x in now]], floor, compute_dtype="bfloat16")  # a broken engine


def test_a_bit_exact_engine_is_not_held_to_infinite_precision() -> None:
    """Our torch engine is bit-exact with the trainer (noise 0): a tiny numerical difference on a tiny effect
    must not become a huge c."""
    floor, _, prev, now = setup(effect=1e-4, noise_scale=0.0)
    tiny = [x + 1e-6 * math.sin(i) for i, x in enumerate(now)]
    assert check(now, [tiny], floor, compute_dtype="bfloat16", previous=prev).raw < 1e-5


def test_every_scoring_is_checked() -> None:
    """The exact LoRA arithmetic and the generation path (folded weights) are both held to the check."""
    floor, t0, prev, now = setup(effect=0.3, noise_scale=0.0)
    with pytest.raises(CanaryMismatch, match="zeroed"):
        check(now, [now, t0], floor, compute_dtype="float32", previous=prev)


def test_the_base_models_themselves_must_agree() -> None:
    t0 = [-1.0] * N
    with pytest.raises(CanaryMismatch, match="do not serve the same model"):
        NoiseFloor.measure([x - 2 * BASE_DISAGREEMENT for x in t0], t0)
    with pytest.raises(CanaryMismatch, match="do not tokenize alike"):
        NoiseFloor.measure(t0[:-1], t0)
    assert NoiseFloor.measure([x + 0.01 for x in t0], t0).mean_abs == pytest.approx(0.01)


def test_dtype_floors_by_name() -> None:
    assert dtype_floor("torch.float32").raw == 1e-3 and dtype_floor("bfloat16").raw == 0.05
    assert dtype_floor("bfloat16") == dtype_floor("torch.bfloat16")
    assert dtype_floor("float16").raw < dtype_floor("bfloat16").raw


def test_in_float32_the_first_64_tokens_still_tell_each_wrong_adapter_from_the_right_one() -> None:
    """The float32 probe is cut to `PROBE_TOKENS` tokens: with float32's noise, an adapter that moves logprobs
    by ~1e-3 nats per token (a hundredth of a small real step) is resolved on them, and each wrong one fails."""
    n = probe_tokens("torch.float32")
    assert n is not None and n < N
    _, t0, prev, now = setup(effect=2e-3, noise_scale=1e-6)
    floor = NoiseFloor.measure(served(t0, 1e-6)[:n], t0[:n])
    right = check(now[:n], [served(now, 1e-6)[:n]], floor, compute_dtype="float32", previous=prev[:n])
    c = right.resolved("effect")
    assert c is not None and abs(c) < 0.1, right
    doubled = [2 * a - b for a, b in zip(now, t0, strict=True)]
    for wrong in (t0, prev, doubled):  # zeroed, stale, x2
        with pytest.raises(CanaryMismatch):
            check(now[:n], [wrong[:n]], floor, compute_dtype="float32", previous=prev[:n])


class _Engine:
    """What `Service._probe_ids` reads of an engine: the rendered probe, the context and the dtype."""

    def __init__(self, compute_dtype: str, max_model_len: int = 4096) -> None:
        self.compute_dtype, self.max_model_len = compute_dtype, max_model_len
        self.chat_template = self

    def render_ids(self, messages: object) -> list[int]:
        return list(range(196))


@pytest.mark.parametrize(
    ("compute_dtype", "max_model_len", "scored"),
    [
        ("torch.float32", 4096, 64),
        ("torch.bfloat16", 4096, 196),
        ("float32", 33, 32),
        ("torch.float16", 101, 100),
    ],
)
def test_the_service_scores_as_much_of_the_probe_as_its_dtype_needs(
    compute_dtype: str, max_model_len: int, scored: int
) -> None:
    from art.service.service import ModelService

    stand_in = type("S", (), {"_require": lambda self: (_Engine(compute_dtype, max_model_len), None)})()
    assert ModelService._probe_ids(stand_in) == list(range(scored))  # type: ignore[arg-type]
