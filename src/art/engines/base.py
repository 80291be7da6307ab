"""The engine protocol: what the service needs from any inference engine, and the token-level types.

An engine turns prompt token ids into sampled token ids (with their logprobs) under a named model: the
base model or one of its LoRA adapters. Everything chat-shaped (rendering messages with the chat template,
parsing tool calls, the OpenAI wire format) lives above it in `art.openai_server.chat_completions`, so the
built-in `TorchEngine` and a later vLLM engine implement the same small surface:

- `generate(request)` streams `GenerateOutput`s for one sequence (closing the iterator aborts it);
- adapters: `load_adapter` / `unload_adapter` / `set_alias`, names listed by `model_names()`;
- `pause()` / `resume()` around a training step, `score()` as a canary against the trainer, `close()`;
- `run(fn)`: where the service runs its heavy work (training steps, checkpoint saves) so that it does not
  fight generation for the CPU (the torch engine: its own worker thread; others: a thread of the service);
  `release_idle_cache()` before a step, `warm_up()` after start.

The service (`art.service.service`) depends on this protocol only; which engine it gets is decided by
`RuntimeOptions.engine` in `art.engines.factory`.

Conventions every engine keeps:
- `GenerateOutput.token_ids` are the exact sampled ids, including the final stop token (e.g. `<|im_end|>`,
  or one of `stop_token_ids`) when generation ended on one; `logprobs` has one entry per id: the
  log-softmax of the model's *raw* logits at that position (before temperature, top_p, top_k, min_p,
  penalties, logit_bias and any structured-output mask), so training, which scores the sampled ids under
  the unconstrained policy, can use them as the sampling policy's logprobs without another forward pass.
- `seed` fixes the sampled tokens for a given prompt and model, whatever else is batched alongside.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from art.chat.chat_template import ChatTemplate
from art.chat.grammar import StructuredOutputs
from art.engines.devices import DevicePlan
from art.types import RuntimeOptions

FinishReason = Literal["stop", "length", "abort"]
T = TypeVar("T")
_MASK64 = (1 << 64) - 1


def splitmix64_reference(x: int) -> int:
    """Pure-Python splitmix64 on unsigned 64-bit ints (the torch engine's sampler is checked against it; choice seeds use it)."""
    z = (x + 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


class EngineError(Exception):
    """Base class of errors an engine raises for a request (the server maps them to HTTP codes)."""


class ModelNotFoundError(EngineError):
    """The requested model name is neither the base model, an adapter, nor an alias."""

    def __init__(self, name: str) -> None:
        super().__init__(f"The model `{name}` does not exist.")
        self.name = name


class ContextLengthError(EngineError):
    """A prompt does not fit the engine's context window."""


class InvalidRequestError(EngineError, ValueError):
    """A request the engine cannot serve as given (token ids outside the vocabulary, a grammar that does not
    compile): the caller's fault, answered with a 400."""


class EngineClosedError(EngineError):
    """The engine was closed while the request waited or ran."""


class EngineUnavailableError(EngineError):
    """The engine cannot serve (e.g. vLLM's server process died); the message names the cause (HTTP 503)."""


class SamplingParams(BaseModel):
    """How to sample one sequence. Defaults are OpenAI's (temperature 1, top_p 1, no length limit)."""

    model_config = ConfigDict(frozen=True)

    temperature: float = Field(default=1.0, ge=0.0, le=2.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    max_tokens: int | None = Field(default=None, ge=1, description="None: until the context window is full")
    seed: int = Field(
        default=0, ge=0, lt=2**63, description="with the prompt and model, fixes the sampled tokens"
    )
    top_logprobs: int = Field(default=0, ge=0, le=20, description="alternatives to report per sampled token")
    ignore_eos: bool = Field(
        default=False, description="keep generating past end-of-turn tokens until max_tokens (benchmarks)"
    )
    # vLLM's extra sampling fields (an engine that cannot honour one must refuse the request)
    top_k: int = Field(default=0, ge=0, description="sample among the k most likely tokens (0: all)")
    min_p: float = Field(default=0.0, ge=0.0, le=1.0, description="drop tokens below min_p x the top one's")
    repetition_penalty: float = Field(
        default=1.0, gt=0.0, le=100.0, description="> 1 discourages tokens of the prompt and output (HF/vLLM)"
    )
    presence_penalty: float = Field(default=0.0, ge=-2.0, le=2.0, description="OpenAI's, on output tokens")
    frequency_penalty: float = Field(default=0.0, ge=-2.0, le=2.0, description="OpenAI's, on output tokens")
    stop_token_ids: tuple[int, ...] = Field(default=(), description="more ids that end the sequence")
    logit_bias: dict[int, float] = Field(default_factory=dict, description="OpenAI's: token id -> bias")
    structured_outputs: StructuredOutputs | None = Field(
        default=None, description="constrain the sequence to a JSON schema, regex, choice or grammar"
    )

    @property
    def needs_processing(self) -> bool:
        """Whether any field beyond temperature/top_p/seed changes the logits a token is drawn from."""
        return bool(
            self.top_k
            or self.min_p
            or self.repetition_penalty != 1.0
            or self.presence_penalty
            or self.frequency_penalty
            or self.stop_token_ids
            or self.logit_bias
            or self.structured_outputs is not None
        )


class GenerateRequest(BaseModel):
    """One sequence to generate: a served model name, the prompt's token ids and sampling parameters."""

    model_config = ConfigDict(frozen=True)

    model: str
    prompt_token_ids: list[int] = Field(min_length=1)
    sampling: SamplingParams = Field(default_factory=SamplingParams)


@dataclass(frozen=True, slots=True)
class GenerateOutput:
    """Tokens a sequence gained since the previous output (a plain dataclass: made once per token).

    `top_logprobs[i]` lists (token id, logprob) alternatives for `token_ids[i]`, best first, when the
    request asked for them (else None). `finish_reason` is set on the last output only.
    """

    token_ids: list[int]
    logprobs: list[float]
    top_logprobs: list[list[tuple[int, float]]] | None
    finish_reason: FinishReason | None
    model: str
    checkpoint_step: int | None


@runtime_checkable
class Engine(Protocol):
    """An inference engine serving a base model and its LoRA adapters (see the module docstring)."""

    base_model_name: str
    tokenizer: Any
    chat_template: ChatTemplate
    max_model_len: int

    @property
    def compute_dtype(self) -> str:
        """The dtype generation computes in (e.g. "torch.bfloat16"): the canary's tolerance depends on it."""
        ...

    def model_names(self) -> list[str]:
        """Every servable name: the base model, loaded adapters and aliases."""
        ...

    def load_adapter(
        self, name: str, path: str | os.PathLike[str], *, checkpoint_step: int | None = None
    ) -> None:
        """Serve the PEFT adapter in folder `path` as `name`, replacing a same-named one (while serving)."""
        ...

    def unload_adapter(self, name: str) -> None:
        """Stop serving adapter `name` (requests already running with it finish with it)."""
        ...

    def set_alias(self, alias: str, target: str) -> None:
        """Make `alias` resolve to the served name `target` (e.g. "agent-001" -> "agent-001@3")."""
        ...

    def generate(self, request: GenerateRequest) -> AsyncGenerator[GenerateOutput, None]:
        """Stream the sampled tokens of one sequence; closing the iterator early aborts the sequence."""
        ...

    async def pause(self) -> None:
        """Return once no forward pass runs; until `resume`, new and running requests are held."""
        ...

    async def resume(self) -> None:
        """Let held requests continue."""
        ...

    async def score(self, model: str, token_ids: Sequence[int], *, as_generated: bool = False) -> list[float]:
        """Logprob of `token_ids[i]` given `token_ids[:i]` for i >= 1, under model `model` (also while paused).

        `as_generated`: computed exactly as generation computes (an engine with one code path ignores it)."""
        ...

    async def run(self, fn: Callable[[], T]) -> T:
        """fn() where the service's heavy work belongs (see the module docstring); its result or exception."""
        ...

    def release_idle_cache(self) -> int:
        """Free what generation holds while idle (e.g. the KV cache); the bytes released (0 if nothing).
        Called through `run`, while paused."""
        ...

    async def warm_up(self) -> None:
        """Do once, now, what would otherwise slow the first requests (e.g. building kernels)."""
        ...

    async def close(self) -> None:
        """Stop the engine; requests still waiting fail with `EngineClosedError`."""
        ...


@dataclass(frozen=True)
class ForwardedResponse:
    """An engine's answer to a forwarded HTTP request: a status and a JSON body, or a stream of bytes, and
    `upstream_s`, the seconds the engine's own server took until its answer (a stream: its head) came back
    (our server sends it as `Server-Timing: upstream;dur=<ms>`, which is how `benchmarks/bench_engines.py`
    tells our hop's cost from the engine's)."""

    status: int
    body: Any
    stream: AsyncIterator[bytes] | None = None
    upstream_s: float | None = None


@runtime_checkable
class ChatForwardingEngine(Protocol):
    """An engine whose own server answers `/v1/chat/completions` (vLLM: its chat template and tool parser);
    our server forwards such requests to `forward_chat` instead of rendering them itself."""

    async def forward_chat(self, body: dict[str, Any]) -> ForwardedResponse:
        """Answer one chat completion request body (names resolved, token ids and logprobs included)."""
        ...


@dataclass(frozen=True)
class EngineStart:
    """What starting an engine for one model is given (see `start_engine`)."""

    options: RuntimeOptions
    base_model: str
    served_name: str
    model: Any
    tokenizer: Any
    device: str
    cuda_devices: int
    max_lora_rank: int
    plan: DevicePlan | None = None  # dedicated GPUs (`placement.plan_devices`)


@dataclass(frozen=True)
class EngineKind:
    """One engine `RuntimeOptions.engine` can name: how to check it can run here (before anything loads),
    where the trainer's copy of the model goes, and how to start it."""

    start: Callable[[EngineStart], Awaitable[Engine]]
    check_available: Callable[[RuntimeOptions], None] = lambda options: None
    check_dtype: Callable[[str, str], None] = lambda dtype, device: None  # (dtype name, resolved device)
    trainer_device: Callable[[str, int], str] = lambda device, cuda_devices: device
