"""Sampling sessions of the Tinker API, on the engine that serves a record's checkpoints (or a base model).

A sampler is `{session}:sample:{n}` and names what it samples: a checkpoint of a training model (served
as `{record name}@{step}`: the OpenAI routes' name for it too, loaded on demand), or a base model that a
hosted model or an `art serve --model` chat model serves. Each sample is one `Engine.generate` with the
sampled tokens' logprobs (the engine's raw logprobs, as the SDK's RL losses need); the stop token stays at
the end of the tokens. `stop` as token ids ends on them (and on end-of-turn), as strings on the first
decoded match, and `[]` on nothing but `max_tokens`.
"""

from __future__ import annotations

import asyncio
import math
import secrets
from dataclasses import dataclass
from typing import Any

from art.engines.base import Engine, EngineError, GenerateRequest, SamplingParams
from art.hub.models import ServiceHub
from art.hub.tinker.futures import Futures, Result
from art.hub.tinker.ids import BadInput, NotFound
from art.hub.tinker.training import TinkerTraining, TrainingModel
from art.hub.tinker.wire import Sampled, sample_response

DEFAULT_MAX_TOKENS = 256
"""Tokens per sample when the request sets no `max_tokens`."""


@dataclass
class Sampler:
    """What one sampling session samples: an engine and the name it serves it under."""

    id: str
    engine: Engine
    served_name: str
    base_model: str
    model_path: str | None


class TinkerSampling:
    """Sampling sessions of one `art serve` (see the module docstring)."""

    def __init__(self, hub: ServiceHub, training: TinkerTraining, futures: Futures) -> None:
        self.hub, self.training, self.futures = hub, training, futures
        self.samplers: dict[str, Sampler] = {}

    def add_for_step(
        self, session_id: str, seq: int, model: TrainingModel, step: int, path: str | None
    ) -> str:
        """A sampler of `model`'s checkpoint `step`; its id."""
        engine = model.hosted.service.serving_engine
        if engine is None:
            raise NotFound(f"training model {model.id} is not serving")
        served = model.hosted.service.served_name(step)
        return self._add(session_id, seq, engine, served, model.meta["base_model"], path)

    async def create(self, session_id: str, seq: int, model_path: str | None, base_model: str | None) -> str:
        """A sampler of a checkpoint path, or of a base model (NotFound naming what is not served)."""
        if model_path is not None:
            model, step = await self.training.source(model_path)
            return self.add_for_step(session_id, seq, model, step, model_path)
        if base_model is None:
            raise BadInput("create_sampling_session needs model_path or base_model")
        engine = self._base_engine(base_model)
        return self._add(session_id, seq, engine, engine.base_model_name, base_model, None)

    def _base_engine(self, base_model: str) -> Engine:
        source = self.training.aliases.get(base_model, base_model)
        for hosted in self.hub.models.values():
            if hosted.spec.base_model == source and hosted.service.serving_engine is not None:
                return hosted.service.serving_engine
        if source in self.hub.chat_models:
            return self.hub.chat_models[source]
        served = sorted({h.spec.base_model for h in self.hub.models.values()} | set(self.hub.chat_models))
        raise NotFound(
            f"base model {base_model!r} is not served here (served: {', '.join(served) or 'none'}); "
            "start art serve with --model NAME, or create a training client on it"
        )

    def _add(
        self, session_id: str, seq: int, engine: Engine, served: str, base: str, path: str | None
    ) -> str:
        session = self.training.session(session_id)
        sampler_id = f"{session_id}:sample:{seq}"
        self.samplers[sampler_id] = Sampler(sampler_id, engine, served, base, path)
        session.sampler_ids.append(sampler_id)
        return sampler_id

    def get(self, sampler_id: str) -> Sampler:
        found = self.samplers.get(sampler_id)
        if found is None:
            raise NotFound(f"no sampling session {sampler_id!r} on this server")
        return found

    def describe(self, sampler_id: str) -> dict[str, Any]:
        sampler = self.get(sampler_id)
        return {"sampler_id": sampler.id, "base_model": sampler.base_model, "model_path": sampler.model_path}

    def sample(self, body: dict[str, Any]) -> tuple[str, list[str]]:
        """Queue `num_samples` samples after checking the request; (request id, sequence ids)."""
        sampler = self.get(str(body.get("sampling_session_id")))
        prompt = prompt_tokens(body.get("prompt") or {})
        n = int(body.get("num_samples", 1))
        if not 1 <= n <= 128:
            raise BadInput(f"num_samples={n}: ask for 1 to 128")
        params, stop_strings = sampling_params(body.get("sampling_params") or {})
        if (
            body.get("prompt_alt_tokens_k")
            or body.get("prompt_logprobs_last_n")
            or body.get("topk_prompt_logprobs")
        ):
            raise BadInput("top-k prompt logprobs and prompt alternatives are not computed here")
        seq_ids = [f"{sampler.id}:{body.get('seq_id', 0)}:{i}" for i in range(n)]

        async def work() -> Result:
            seeds = [
                params.seed + i if "seed" in params.model_fields_set else secrets.randbits(62)
                for i in range(n)
            ]
            sequences = await asyncio.gather(
                *(
                    generate(sampler, prompt, params.model_copy(update={"seed": s}), stop_strings)
                    for s in seeds
                )
            )
            logprobs = None
            if body.get("prompt_logprobs"):
                logprobs = [math.nan, *await sampler.engine.score(sampler.served_name, prompt)]
            return sample_response(sequences, logprobs)

        return self.futures.submit(work()), seq_ids


def prompt_tokens(prompt: dict[str, Any]) -> list[int]:
    """The prompt's token ids, its chunks joined (BadInput for an image or an empty prompt)."""
    tokens: list[int] = []
    for chunk in prompt.get("chunks") or []:
        if chunk.get("type", "encoded_text") != "encoded_text":
            raise BadInput(
                f"a {chunk.get('type')} chunk in the prompt; this server samples from text tokens only"
            )
        tokens.extend(int(t) for t in chunk.get("tokens") or [])
    if not tokens:
        raise BadInput("the prompt has no tokens")
    return tokens


def sampling_params(given: dict[str, Any]) -> tuple[SamplingParams, list[str]]:
    """The engine's sampling parameters and the stop strings, from the SDK's `sampling_params`."""
    stop = given.get("stop")
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    fields: dict[str, Any] = {
        "temperature": float(given.get("temperature", 1.0)),
        "top_p": float(given.get("top_p", 1.0)),
        "top_k": max(int(given.get("top_k", -1)), 0),
        "max_tokens": int(given.get("max_tokens") or DEFAULT_MAX_TOKENS),
        "stop_token_ids": tuple(s for s in stops if isinstance(s, int)),
        "ignore_eos": stop is not None and not stops,
    }
    if given.get("seed") is not None:
        fields["seed"] = int(given["seed"]) % 2**62
    try:
        return SamplingParams(**fields), [s for s in stops if isinstance(s, str)]
    except ValueError as e:
        raise BadInput(f"sampling_params {given}: {e}") from None


async def generate(sampler: Sampler, prompt: list[int], params: SamplingParams, stop: list[str]) -> Sampled:
    """One sample: tokens and logprobs up to and including the stop (token or string) or max_tokens."""
    tokens: list[int] = []
    logprobs: list[float] = []
    reason = "length"
    request = GenerateRequest(model=sampler.served_name, prompt_token_ids=prompt, sampling=params)
    stream = sampler.engine.generate(request)
    try:
        async for out in stream:
            tokens += out.token_ids
            logprobs += out.logprobs
            text = sampler.engine.tokenizer.decode(tokens) if stop else ""
            if any(s in text for s in stop):
                reason = "stop"
                break
            if out.finish_reason is not None:
                reason = "length" if out.finish_reason == "length" else "stop"
    except EngineError as e:
        raise BadInput(f"sampling from {sampler.served_name}: {e}") from None
    finally:
        await stream.aclose()
    return Sampled(tokens, logprobs, reason)
