"""Served equals trained: the check a checkpoint passes before it is published (and at every start).

The trainer and the engine are two implementations of one function. In float32 they agree to ~1e-5 nats per
token; in bf16 two correct implementations (our trainer and vLLM's kernels) differ by a few hundredths of a
nat per token on average and up to ~0.3 on a token (measured: docs/gpu.md). A missing, stale or mis-scaled
adapter can differ by less than that on average, so comparing logprobs against an absolute tolerance cannot
tell kernel noise from a wrong adapter. This check compares *directions* instead:

    probe        a fixed conversation of ~200 tokens (`CANARY_PROBE`), scored token by token (its first
                 `PROBE_TOKENS` tokens in float32, where the engine's noise is ~0)
    noise floor  at registration, engine vs trainer on the base model (adapter off): mean |E0 - T0|
    r            engine minus trainer with the step's adapter: E - T (per token)
    d            the adapter's effect as the trainer computes it: T - T0
    delta        the step's own change: T - T_prev (the published step's trainer logprobs)

A correct adapter leaves r as noise, unrelated to d; a wrong one leaves r along d: zeroed r = -d, scaled x2
r ~ +d, stale (the previous step) r = -delta. So the check regresses r on d (and on delta):
`c = <r, d> / <d, d>` is ~0 when served equals trained and ~-1 / ~+1 / ~-1 for the three faults. Averaging
over the probe's tokens shrinks the noise: c's standard error is (rms of what is left of r) / |d|. The check
trusts c only when that standard error is at most `RESOLUTION` and the effect is at least `OVER_NOISE` times
the noise floor, and then fails when |c| > `MAX_OFF`. Every check also applies the plain test: mean |r| within
the tolerance of its dtype and the measured noise floor, which catches a broken engine or base model. So a
wrong adapter whose effect is within the engine's kernel noise (e.g. after one small step in bf16 on vLLM)
passes: no check on these logprobs can tell it from a right one, and its outputs differ from the right one's
by no more than the engine's own noise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

# A fixed conversation: several turns of everyday text (~200 tokens with SmolLM2's tokenizer), so that the
# regression averages over enough tokens for bf16 noise to cancel.
CANARY_PROBE = [
    {
        "role": "system",
        "content": "You are a careful assistant. Answer briefly, and use a tool when it helps.",
    },
    {"role": "user", "content": "What is 2 + 2? Answer briefly."},
    {"role": "assistant", "content": "2 + 2 = 4."},
    {"role": "user", "content": "Name three colours of the rainbow and the capital of France."},
    {"role": "assistant", "content": "Red, green and blue. The capital of France is Paris."},
    {
        "role": "user",
        "content": "We are playing tic-tac-toe. The board is X at A1, O at B2, X at C3. Your move as O?",
    },
    {"role": "assistant", "content": "I take A3, keeping the centre and threatening the column: O at A3."},
    {"role": "user", "content": "Write one sentence about the sea, then count from one to five."},
    {"role": "assistant", "content": "The sea is wide, cold and always moving. One, two, three, four, five."},
]

PROBE_TOKENS = {"float32": 64}
"""How much of the probe is scored, by compute dtype (all of it where not listed). Every step scores it three
times (trainer, engine exact and as generated: 2.2 s of a 5.8 s step for the adder on a 2-core AVX2 host). In
float32 two correct implementations agree to ~1e-6 nats per token, so the dtype's floor (`FLOORS`), not the
noise, sets c's standard error, and 64 tokens resolve any adapter whose effect is above 1.25e-4 nats per token
rms (the whole probe: 7e-5); bf16's noise needs the whole probe to cancel."""


def probe_tokens(compute_dtype: str) -> int | None:
    """How many of the probe's tokens to score in `compute_dtype` (as engines name it), None for all.

    >>> probe_tokens("torch.float32"), probe_tokens("bfloat16")
    (64, None)
    """
    return PROBE_TOKENS.get(compute_dtype.removeprefix("torch."))


MAX_OFF = 0.5
"""The largest |c| a correct adapter may show: the served effect off the trained one by half of it."""

RESOLUTION = 0.1
"""c is trusted when its standard error is at most this (a fault, |c| ~ 1, is then 10 standard errors out)..."""

OVER_NOISE = 2.0
"""... and when what it is measured against (the adapter's effect, the step's change) is at least this many
times the noise floor. Below that an engine's rounding is not just noise around the effect but part of it:
vLLM's bf16 kernels shrink a small adapter's effect by ~0.01 nats per token (measured: c ~ -0.6 for an effect
of 0.012, -0.08 for 0.14; docs/gpu.md), so a tiny but correct step would look half missing."""

NOISE_MULTIPLE = 3.0
"""The plain test allows mean |E - T| up to this many times the noise floor measured at registration."""

BASE_DISAGREEMENT = 0.5
"""Engine and trainer differing by more than this (nats per token) on the base model itself: not the same
model (another checkpoint, tokenizer or a broken engine); registration fails."""


@dataclass(frozen=True)
class DtypeFloor:
    """What one dtype's rounding allows, whatever was measured: `raw` for mean |E - T| (the plain test) and
    `noise` for the rms of the noise in c's standard error (so that a bit-exact engine, noise 0, is not
    held to an infinitely precise c)."""

    raw: float
    noise: float


FLOORS = {
    "float32": DtypeFloor(raw=1e-3, noise=1e-4),
    "bfloat16": DtypeFloor(raw=0.05, noise=1e-2),
    "float16": DtypeFloor(raw=0.02, noise=2e-3),
}
"""Per dtype. The raw floors matter where the base model's noise is ~0 (our torch engine is bit-exact with the
trainer on the base model): they leave room for the rounding an adapter brings and the base model does not
(measured on SmolLM2 in bf16: 0.013-0.016 nats per token for a correct adapter, a third of the floor).
Elsewhere `NOISE_MULTIPLE` x the measured floor decides (vLLM in bf16 on SmolLM2: 3 x 0.042)."""


def dtype_floor(compute_dtype: str) -> DtypeFloor:
    """The floor of a dtype named as engines report it ("torch.bfloat16", "bfloat16", "float32" ...)."""
    name = compute_dtype.removeprefix("torch.")
    return FLOORS.get(name, FLOORS["bfloat16"] if "16" in name else FLOORS["float32"])


class CanaryMismatch(ValueError):
    """The served adapter does not compute what the trainer computes (the message says how far off; `reading`
    holds what was measured, None when the two could not even be compared)."""

    def __init__(self, message: str, reading: CanaryReading | None = None) -> None:
        super().__init__(message)
        self.reading = reading


@dataclass(frozen=True)
class NoiseFloor:
    """Engine vs trainer on the base model (adapter off), measured once when the service starts."""

    trainer_base: tuple[float, ...]  # T0: the trainer's logprobs of the probe, adapter off
    mean_abs: float  # mean |E0 - T0|
    rms: float

    @classmethod
    def measure(cls, engine_base: Sequence[float], trainer_base: Sequence[float]) -> NoiseFloor:
        """The floor from the two base-model scorings of the probe; CanaryMismatch if they are not the same
        model (lengths, non-finite values, or more than `BASE_DISAGREEMENT` nats per token apart)."""
        if len(engine_base) != len(trainer_base) or not trainer_base:
            raise CanaryMismatch(
                f"the engine scored {len(engine_base)} tokens of the probe, the trainer {len(trainer_base)}: "
                "they do not tokenize alike"
            )
        r = [e - t for e, t in zip(engine_base, trainer_base, strict=True)]
        mean_abs = _mean_abs(r)
        if not math.isfinite(mean_abs) or mean_abs > BASE_DISAGREEMENT:
            raise CanaryMismatch(
                f"on the base model itself (no adapter) the engine's logprobs differ from the trainer's by "
                f"{mean_abs:.4g} nats per token on average (at most {BASE_DISAGREEMENT} is kernel noise): "
                "they do not serve the same model (another checkpoint, tokenizer or dtype, or a broken engine)"
            )
        return cls(tuple(trainer_base), mean_abs, _rms(r))


@dataclass(frozen=True)
class CanaryReading:
    """What one check measured. `effect_error` / `step_error` are c against the adapter's effect and against
    the step's change, with their standard errors (`*_se`; c counts only where that is <= `RESOLUTION`)."""

    raw: float  # mean |E - T| (the worst of the engine's scorings)
    tolerance: float  # what the plain test allows for raw
    noise_floor: float  # mean |E0 - T0| at registration
    effect: float  # mean |T - T0|
    step_change: float  # mean |T - T_prev| (0 without a published step to compare with)
    effect_error: float
    effect_error_se: float  # inf when the adapter changes nothing
    step_error: float | None = None  # None without a published step to compare with
    step_error_se: float = math.inf
    dtype: str = ""

    def resolved(self, which: str) -> float | None:
        """c of "effect" or "step" if the probe resolves it, else None."""
        c, se, size = (
            (self.effect_error, self.effect_error_se, self.effect)
            if which == "effect"
            else (self.step_error, self.step_error_se, self.step_change)
        )
        if c is None or se > RESOLUTION or size < OVER_NOISE * self.noise_floor:
            return None
        return c

    def failure(self) -> str | None:
        """Why the served adapter is not the trained one, or None when it passes."""
        c, c_step = self.resolved("effect"), self.resolved("step")
        if any(x is not None and abs(x) > MAX_OFF for x in (c, c_step)):
            # Name the fault whose signature fits best: stale leaves c_step ~ -1, zeroed c ~ -1, doubled c ~ +1.
            if c_step is not None and c_step < 0 and (c is None or abs(c_step + 1) < abs(c + 1)):
                kind = "it looks stale (an earlier step's adapter)"
            elif (c if c is not None else c_step or 0.0) < 0:
                kind = "it looks zeroed or missing"
            else:
                kind = "it looks scaled up"
            found = []
            if c is not None:
                found.append(f"its effect is {c:+.0%} off the trained one's (+-{self.effect_error_se:.2g})")
            if c_step is not None:
                found.append(
                    f"its change since the published step is {c_step:+.0%} off this step's "
                    f"(+-{self.step_error_se:.2g})"
                )
            return (
                f"{kind}: {' and '.join(found)}, where a correct adapter is within {MAX_OFF:.0%}; mean "
                f"|served - trained| {self.raw:.4g} nats per token, adapter effect {self.effect:.4g}"
            )
        if self.raw > self.tolerance:
            return (
                f"the served logprobs differ from the trainer's by {self.raw:.4g} nats per token on average "
                f"(tolerance {self.tolerance:.3g}: the {self.dtype} floor or {NOISE_MULTIPLE:g} x the noise "
                f"floor; the adapter's effect is {self.effect:.4g})"
            )
        return None

    def metrics(self) -> dict[str, float]:
        """The reading as step metrics (`canary_*`), leaving out what the probe could not resolve."""
        out = {
            "canary_noise_floor": self.noise_floor,
            "canary_tolerance": self.tolerance,
            "canary_adapter_effect": self.effect,
        }
        for which in ("effect", "step"):
            c = self.resolved(which)
            if c is not None:
                out[f"canary_{which}_error"] = c
        return out


def check(
    trained: Sequence[float],
    served: Sequence[Sequence[float]],
    noise: NoiseFloor,
    *,
    compute_dtype: str,
    previous: Sequence[float] | None = None,
    raw_tolerance: float | None = None,
) -> CanaryReading:
    """Check the engine's scorings of the probe (`served`: one or more, e.g. exact and as generation computes
    it) against the trainer's (`trained`); raise CanaryMismatch with what was measured if they differ by more
    than kernel noise. `previous`: the trainer's logprobs of the published step (for the stale check);
    `raw_tolerance` overrides the plain test's tolerance (`RuntimeOptions.canary_tolerance`)."""
    dtype = compute_dtype.removeprefix("torch.")
    floor = dtype_floor(dtype)
    d = [t - t0 for t, t0 in zip(trained, noise.trainer_base, strict=True)]
    delta = None if previous is None else [t - p for t, p in zip(trained, previous, strict=True)]
    worst: CanaryReading | None = None
    for scores in served:
        if len(scores) != len(trained):
            raise CanaryMismatch(
                f"the engine scored {len(scores)} tokens of the probe, the trainer {len(trained)}"
            )
        r = [e - t for e, t in zip(scores, trained, strict=True)]
        raw = _mean_abs(r)
        if not math.isfinite(raw):
            raise CanaryMismatch("the engine's logprobs of the probe are not finite")
        c, se = _regress(r, d, floor.noise)
        c_step, se_step = _regress(r, delta, floor.noise) if delta is not None else (None, math.inf)
        reading = CanaryReading(
            raw=raw,
            tolerance=raw_tolerance or max(floor.raw, NOISE_MULTIPLE * noise.mean_abs),
            noise_floor=noise.mean_abs,
            effect=_mean_abs(d),
            step_change=0.0 if delta is None else _mean_abs(delta),
            effect_error=c,
            effect_error_se=se,
            step_error=c_step,
            step_error_se=se_step,
            dtype=dtype,
        )
        failure = reading.failure()
        if failure is not None:
            raise CanaryMismatch(failure, reading)
        if worst is None or reading.raw > worst.raw:
            worst = reading
    assert worst is not None, "no scoring to check"
    return worst


def _regress(r: Sequence[float], x: Sequence[float], noise_floor: float) -> tuple[float, float]:
    """(c, its standard error) of the least-squares fit r ~ c x through the origin; the standard error uses
    the rms of the residual, at least `noise_floor`. (0, inf) when x is all zeros."""
    xx = sum(v * v for v in x)
    if xx <= 0.0:
        return 0.0, math.inf
    c = sum(a * b for a, b in zip(r, x, strict=True)) / xx
    residual = _rms([a - c * b for a, b in zip(r, x, strict=True)])
    return c, max(residual, noise_floor) / math.sqrt(xx)


def _mean_abs(values: Sequence[float]) -> float:
    return sum(abs(v) for v in values) / max(len(values), 1)


def _rms(values: Sequence[float]) -> float:
    return math.sqrt(sum(v * v for v in values) / max(len(values), 1))
