"""The working half of `art.TinkerBackend`: one `TrainableModel` trained and served through a Tinker-API
server with the official `tinker` SDK (imported here, at registration: the SDK imports torch where it is
installed, as `LocalBackend` does; `import art` and `art.TinkerBackend` stay light).

Serving: `TinkerEngine` is an `art.engines.base.Engine` whose `generate` is a Tinker sample (the sampled ids
and their logprobs) from the sampler saved at a step; the project's OpenAI-compatible server
(`art.openai_server.http.create_app`) serves it on a loopback port, so `model.openai_client()` renders,
parses tool calls and returns trainable Choices exactly as with `LocalBackend`.

Training: the step's groups are tokenised by the project's own code (`art.training.prepare.prepare_step`:
advantages, chat template, sampled ids spliced in), each sequence becomes a Tinker datum (targets, the
sampled logprobs, the advantage on the trained tokens divided by the step's trained tokens, so that
Tinker's sum is our mean), then `forward_backward` with the step's loss (`cispo` or `ppo`, the clip range as
Tinker's thresholds), `optim_step` (AdamW with the step's settings), and `save_state` +
`save_weights_for_sampler` as `step-{n:04d}`: the new step is served as `name@n`. The state paths are kept
in the model's `model.json` (`tinker`), from which a later registration resumes.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import AsyncGenerator, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from art.backends.base import prepare_groups_for_training
from art.chat.chat_template import ChatTemplate
from art.engines.base import FinishReason, GenerateOutput, GenerateRequest, ModelNotFoundError
from art.model import TrainableModel
from art.trajectories import TrajectoryGroup
from art.types import LOSS_FN_CHOICES, LOSS_FNS, TrainResult, TrainSpec

logger = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_RANK = 8
"""The LoRA rank of a model whose `lora_config` sets none (ART's default)."""


def stop_ids(tokenizer: Any) -> list[int]:
    """End-of-turn ids: the tokenizer's eos and ChatML's `<|im_end|>` where the vocabulary has it."""
    ids = {int(tokenizer.eos_token_id)} if tokenizer.eos_token_id is not None else set()
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    if isinstance(im_end, int) and im_end != tokenizer.unk_token_id:
        ids.add(im_end)
    return sorted(ids)


class TinkerEngine:
    """An `Engine` whose generations are Tinker samples, one sampler per trained step (`name@step`)."""

    compute_dtype = "tinker"  # the server's; nothing here computes

    def __init__(self, name: str, base_model: str, tokenizer: Any, max_model_len: int) -> None:
        self.name, self.base_model_name = name, base_model
        self.tokenizer = tokenizer
        self.chat_template = ChatTemplate(tokenizer)
        self.max_model_len = max_model_len
        self.samplers: dict[int, Any] = {}
        self.newest = 0
        self._stops = stop_ids(tokenizer)

    def model_names(self) -> list[str]:
        return [self.name, *(f"{self.name}@{s}" for s in sorted(self.samplers))]

    def _sampler(self, model: str) -> tuple[int, Any]:
        step = self.newest if model == self.name else None
        if model.startswith(f"{self.name}@") and model.rsplit("@", 1)[1].isdigit():
            step = int(model.rsplit("@", 1)[1])
        if step is None or step not in self.samplers:
            raise ModelNotFoundError(model)
        return step, self.samplers[step]

    async def generate(self, request: GenerateRequest) -> AsyncGenerator[GenerateOutput, None]:
        from tinker import types

        step, sampler = self._sampler(request.model)
        s = request.sampling
        stop: list[int] = [] if s.ignore_eos else sorted({*self._stops, *s.stop_token_ids})
        params = types.SamplingParams(
            max_tokens=s.max_tokens or max(self.max_model_len - len(request.prompt_token_ids), 1),
            temperature=s.temperature,
            top_p=s.top_p,
            top_k=s.top_k or -1,
            seed=s.seed,
            stop=stop,
        )
        prompt = types.ModelInput.from_ints(request.prompt_token_ids)
        result = await sampler.sample(prompt=prompt, num_samples=1, sampling_params=params)
        seq = result.sequences[0]
        reason: FinishReason = "stop" if seq.stop_reason == "stop" else "length"
        yield GenerateOutput(list(seq.tokens), list(seq.logprobs or []), None, reason, request.model, step)

    async def score(self, model: str, token_ids: Sequence[int], *, as_generated: bool = False) -> list[float]:
        from tinker import types

        _, sampler = self._sampler(model)
        logprobs = await sampler.compute_logprobs(types.ModelInput.from_ints(list(token_ids)))
        return [float(x) for x in logprobs[1:]]

    def load_adapter(self, name: str, path: Any, *, checkpoint_step: int | None = None) -> None:
        raise NotImplementedError("a Tinker model's steps are its server's sampler checkpoints")

    def unload_adapter(self, name: str) -> None:
        if name.startswith(f"{self.name}@"):
            self.samplers.pop(int(name.rsplit("@", 1)[1]), None)

    def set_alias(self, alias: str, target: str) -> None:
        return None  # `name` is always the newest step

    async def pause(self) -> None:
        return None

    async def resume(self) -> None:
        return None

    async def run(self, fn: Callable[[], T]) -> T:
        return await asyncio.to_thread(fn)

    def release_idle_cache(self) -> int:
        return 0

    async def warm_up(self) -> None:
        return None

    async def close(self) -> None:
        self.samplers.clear()


class TinkerRun:
    """One model on a Tinker server: its training client, its engine, its served endpoint, its steps."""

    def __init__(self, model: TrainableModel, service: Any, training: Any, engine: TinkerEngine) -> None:
        self.model, self.service, self.training, self.engine = model, service, training, engine
        self.server: Any = None
        self.base_url = ""
        self.states: dict[int, str] = {}  # step -> tinker path of its state (weights and optimizer)

    @property
    def step(self) -> int:
        return self.engine.newest

    @classmethod
    async def start(cls, model: TrainableModel, service: Any, api_key: str) -> TinkerRun:
        """Create (or resume from `model.json`) the model's training client, then serve it on a local port."""
        from transformers import AutoTokenizer

        from art.openai_server.http import ServerThread, create_app

        stored = (model.storage.read_model_json() or {}).get("tinker") or {}
        states = {int(k): v for k, v in (stored.get("states") or {}).items()}
        if states:
            newest = max(states)
            training = await service.create_training_client_from_state_with_optimizer(states[newest])
        else:
            rank = model.lora_config.r if model.lora_config is not None else DEFAULT_RANK
            training = await service.create_lora_training_client(base_model=model.base_model, rank=rank)
        tokenizer = await asyncio.to_thread(AutoTokenizer.from_pretrained, model.base_model)
        engine = TinkerEngine(model.name, model.base_model, tokenizer, _context_length(model.base_model))
        run = cls(model, service, training, engine)
        run.states = states
        for step, path in (stored.get("samplers") or {}).items():
            engine.samplers[int(step)] = await service.create_sampling_client(model_path=path)
        if not engine.samplers:  # step 0: the untrained adapter
            await run._publish(0)
        engine.newest = max(engine.samplers)
        run.server = ServerThread(create_app(engine, api_key=api_key))
        run.base_url = await asyncio.to_thread(run.server.start, "127.0.0.1", 0)
        return run

    async def _publish(self, step: int) -> None:
        """Save the training client's state and sampler weights as `step-{step:04d}` and serve the step."""
        name = f"step-{step:04d}"
        state = await self.training.save_state(name)
        sampler_path = (await self.training.save_weights_for_sampler(name)).path
        self.engine.samplers[step] = await self.service.create_sampling_client(model_path=sampler_path)
        self.engine.newest = step
        self.states[step] = state.path
        stored = self.model.storage.read_model_json() or {}
        tinker = stored.get("tinker") or {}
        samplers = {**(tinker.get("samplers") or {}), str(step): sampler_path}
        states = {str(k): v for k, v in self.states.items()}
        self.model.storage.write_model_json({**stored, "tinker": {"samplers": samplers, "states": states}})

    async def train(self, groups: Sequence[TrajectoryGroup], spec: TrainSpec) -> TrainResult:
        """One step on the Tinker server (see the module docstring); the new step is served when it returns."""
        from tinker import types

        from art.training.prepare import prepare_step
        from art.training.tokenize import TrajectoryTokenizer

        check_spec(spec)
        groups = prepare_groups_for_training(groups, without_logprobs=spec.allow_training_without_logprobs)
        tokenizer = TrajectoryTokenizer(self.engine.chat_template)
        data = await asyncio.to_thread(prepare_step, groups, tokenizer, spec, current_step=self.step)
        metrics = dict(data.metrics)
        if data.sequences:
            datums = await self._datums(data.sequences)
            eps, eps_high = spec.clip_range()
            config = {"clip_low_threshold": 1.0 - eps, "clip_high_threshold": 1.0 + eps_high}
            result = await self.training.forward_backward(datums, spec.loss_fn, config)
            adam = types.AdamParams(
                learning_rate=spec.learning_rate,
                beta1=spec.adam_betas[0],
                beta2=spec.adam_betas[1],
                eps=1e-8,
                weight_decay=spec.weight_decay,
                grad_clip_norm=spec.max_grad_norm,
            )
            step = await self.training.optim_step(adam)
            metrics["loss"] = float(result.metrics.get("loss:sum", math.nan))
            metrics.update({k.split(":")[0]: float(v) for k, v in (step.metrics or {}).items()})
        await self._publish(self.step + 1)
        return TrainResult(step=self.step, metrics=metrics, message=data.message)

    async def _datums(self, sequences: Sequence[Any]) -> list[Any]:
        """Tinker datums of tokenised sequences: the advantage on trained tokens over the step's count."""
        from tinker import types

        trained = max(sum(s.num_assistant_tokens for s in sequences), 1)
        datums = []
        for seq in sequences:
            mask = [bool(m) for m in seq.assistant_mask[1:]]
            sampled = [0.0 if math.isnan(x) else float(x) for x in seq.sampled_logprobs[1:]]  # NaN: untrained
            advantages = [seq.advantage / trained if m else 0.0 for m in mask]
            inputs = {"target_tokens": seq.token_ids[1:], "logprobs": sampled, "advantages": advantages}
            datums.append(
                types.Datum(model_input=types.ModelInput.from_ints(seq.token_ids[:-1]), loss_fn_inputs=inputs)
            )
        return datums

    async def close(self) -> None:
        if self.server is not None:
            await asyncio.to_thread(self.server.close)
            self.server = None


def check_spec(spec: TrainSpec) -> None:
    """Refuse (ValueError, naming the option) what a Tinker server cannot be asked for."""
    if spec.loss_fn not in LOSS_FNS:  # a Tinker server computes both of ours (and more, under its names)
        raise ValueError(
            f"TinkerBackend: loss_fn={spec.loss_fn!r}; a Tinker server computes {LOSS_FN_CHOICES}"
        )
    if spec.importance_sampling_level != "token":
        raise ValueError(
            "TinkerBackend: importance_sampling_level must be 'token' (Tinker's losses are per token)"
        )
    if spec.allow_training_without_logprobs:
        raise ValueError("TinkerBackend: every trained turn needs its sampled logprobs (a Choice)")
    if spec.kl_penalty_coef > 0:
        raise ValueError("TinkerBackend: kl_penalty_coef > 0 is not available through the Tinker API")


def _context_length(base_model: str) -> int:
    """The base model's context length where its config says it (a local folder), else 4096."""
    config = Path(base_model) / "config.json"
    if config.is_file():
        value = json.loads(config.read_text(encoding="utf-8")).get("max_position_embeddings")
        if isinstance(value, int):
            return value
    return 4096
