"""`VllmEngine`: the `Engine` protocol over a vLLM server subprocess (`server_process`).

What maps to what:
- adapters: `load_adapter(name, path)` is `POST /v1/load_lora_adapter {lora_name, lora_path,
  load_inplace}` (runtime LoRA updating), `unload_adapter` is `/v1/unload_lora_adapter`; aliases ("agent-001"
  -> "agent-001@3") live here, vLLM knows only the adapters' own names;
- `generate` / `score` are `POST /v1/completions` with the prompt as token ids: `logprobs` and
  `return_token_ids` give the sampled ids and their logprobs (vLLM's default `raw_logprobs`: before
  temperature, our convention), `prompt_logprobs=0` the canary's per-token scores;
- `pause` holds new requests (across event loops: the server's and the service's); with sleep mode (the
  trainer shares vLLM's GPU) it also waits for running requests and `POST /sleep?level=1` (weights to host
  memory, KV cache dropped); the first call that needs the server again (`load_adapter`, `score`, `resume`)
  `POST /wake_up`s it. vLLM's CPU build has no sleep mode: on CPU (and with inference on a GPU of its own)
  requests already running go on while the trainer trains;
- a dead server: every request fails with `EngineUnavailableError` (HTTP 503) naming its exit code and
  log tail; `close()` and a new service over the same storage start over from the newest checkpoint.

`/v1/chat/completions` is forwarded whole (`chat_forward`), so vLLM's chat template and `hermes` tool
parser serve it.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import Any, TypeVar

import httpx

from art.chat.chat_template import ChatTemplate
from art.engines.base import (
    ContextLengthError,
    EngineClosedError,
    EngineError,
    EngineUnavailableError,
    FinishReason,
    ForwardedResponse,
    GenerateOutput,
    GenerateRequest,
    ModelNotFoundError,
)
from art.engines.vllm.chat_forward import forward_chat
from art.engines.vllm.server_process import VllmServer

T = TypeVar("T")
_POLL_S = 0.02
PASSED_THROUGH = (
    "top_k",
    "min_p",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "stop_token_ids",
)
"""`SamplingParams` fields that go to vLLM as they are, when `SamplingParams` has them (chat requests are
forwarded whole, so there every field the user sends reaches vLLM anyway)."""
ADMIN_TIMEOUT_S = 600.0  # loading an adapter or waking a large model can take minutes


class VllmEngine:
    """Serves a base model and its adapters through a running `VllmServer` (see the module docstring)."""

    def __init__(
        self,
        server: VllmServer,
        tokenizer: Any,
        *,
        served_name: str,
        compute_dtype: str,
        max_model_len: int,
        sleep_mode: bool = False,
    ) -> None:
        self.server = server
        self.tokenizer = tokenizer
        self.chat_template = ChatTemplate(tokenizer)
        self.base_model_name = served_name
        self.max_model_len = max_model_len
        self.sleep_mode = sleep_mode
        self._compute_dtype = compute_dtype
        self._adapters: dict[str, int | None] = {}
        self._aliases: dict[str, str] = {}
        self._state = threading.Lock()
        self._open = threading.Event()
        self._open.set()
        self._in_flight = 0
        self._asleep = False
        self._closed = False
        self._clients: dict[int, tuple[asyncio.AbstractEventLoop, httpx.AsyncClient]] = {}
        self._sync = httpx.Client(
            base_url=server.base_url,
            headers={"Authorization": f"Bearer {server.api_key}"},
            timeout=ADMIN_TIMEOUT_S,
        )

    # ---- names ------------------------------------------------------------------------------------
    @property
    def compute_dtype(self) -> str:
        """The dtype vLLM computes in (its `--dtype`), e.g. "torch.float32"."""
        return self._compute_dtype

    def model_names(self) -> list[str]:
        """The base model, the loaded adapters and the aliases."""
        return [self.base_model_name, *self._adapters, *self._aliases]

    def resolve(self, name: str) -> tuple[str, int | None]:
        """(the name vLLM serves, its checkpoint step) for a name of ours; ModelNotFoundError if unknown."""
        target = self._aliases.get(name, name)
        if target == self.base_model_name:
            return target, None
        if target in self._adapters:
            return target, self._adapters[target]
        raise ModelNotFoundError(name)

    def load_adapter(
        self, name: str, path: str | os.PathLike[str], *, checkpoint_step: int | None = None
    ) -> None:
        """`POST /v1/load_lora_adapter` (replacing a same-named adapter in place)."""
        self._wake_if_asleep()
        body = {"lora_name": name, "lora_path": os.fspath(path), "load_inplace": True}
        self._admin("/v1/load_lora_adapter", body)
        self._adapters[name] = checkpoint_step

    def unload_adapter(self, name: str) -> None:
        """`POST /v1/unload_lora_adapter`; aliases pointing at it are dropped too."""
        if name not in self._adapters:
            raise ModelNotFoundError(name)
        self._wake_if_asleep()
        self._admin("/v1/unload_lora_adapter", {"lora_name": name})
        del self._adapters[name]
        for alias in [a for a, t in self._aliases.items() if t == name]:
            del self._aliases[alias]

    def set_alias(self, alias: str, target: str) -> None:
        """Make `alias` resolve to `target` (a served name) in every request from now on."""
        self.resolve(target)
        self._aliases[alias] = target

    # ---- requests ---------------------------------------------------------------------------------
    async def admit(self) -> None:
        """Wait while paused, then count the request as running (`release` when it ends)."""
        while True:
            self._check_alive()
            if self._open.is_set():
                with self._state:
                    if self._open.is_set():
                        self._in_flight += 1
                        return
            await asyncio.sleep(_POLL_S)

    def release(self) -> None:
        """A request admitted by `admit` has ended."""
        with self._state:
            self._in_flight -= 1

    def client(self) -> httpx.AsyncClient:
        """An HTTP client to vLLM for the running event loop (requests come from our server's loop and the
        service's)."""
        loop = asyncio.get_running_loop()
        entry = self._clients.get(id(loop))
        if entry is None or entry[0] is not loop:
            client = httpx.AsyncClient(
                base_url=self.server.base_url,
                headers={"Authorization": f"Bearer {self.server.api_key}"},
                timeout=httpx.Timeout(None, connect=10.0),
                limits=httpx.Limits(max_connections=None, max_keepalive_connections=64),
            )
            self._clients[id(loop)] = entry = (loop, client)
        return entry[1]

    async def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        """POST to vLLM; a dead server becomes EngineUnavailableError (503) naming the cause."""
        try:
            return await self.client().post(path, json=body)
        except httpx.TransportError as exc:
            raise self.unavailable(exc) from None

    async def generate(self, request: GenerateRequest) -> AsyncGenerator[GenerateOutput, None]:
        """One `/v1/completions` call over the prompt's token ids; yields the whole sequence at once."""
        served, step = self.resolve(request.model)
        s = request.sampling
        body: dict[str, Any] = {
            "model": served,
            "prompt": list(request.prompt_token_ids),
            "temperature": s.temperature,
            "top_p": s.top_p,
            "seed": s.seed,
            "logprobs": s.top_logprobs,
            "return_token_ids": True,
            "ignore_eos": s.ignore_eos,
            "skip_special_tokens": False,
        }
        if s.max_tokens is not None:
            body["max_tokens"] = s.max_tokens
        for name in PASSED_THROUGH:  # engine-neutral fields vLLM's sampling takes under the same names
            value = getattr(s, name, None)
            if value is not None:
                body[name] = value
        await self.admit()
        try:
            response = await self.post("/v1/completions", body)
        finally:
            self.release()
        choice = _json_or_raise(response, request.model)["choices"][0]
        ids = [int(i) for i in choice["token_ids"]]
        entries = choice.get("logprobs") or {}
        logprobs = [float(x) for x in entries.get("token_logprobs") or []]
        if len(logprobs) != len(ids):
            raise EngineError(f"vLLM returned {len(ids)} token ids but {len(logprobs)} logprobs")
        top = None
        if s.top_logprobs:
            top = [
                sorted(((_token_id(k), float(v)) for k, v in alt.items()), key=lambda kv: -kv[1])[
                    : s.top_logprobs
                ]
                for alt in entries.get("top_logprobs") or []
            ]
        finish: FinishReason = "length" if choice.get("finish_reason") == "length" else "stop"
        yield GenerateOutput(ids, logprobs, top, finish, served, step)

    async def score(self, model: str, token_ids: Sequence[int], *, as_generated: bool = False) -> list[float]:
        """`prompt_logprobs` of `token_ids` under `model` (works while paused: the canary runs then)."""
        served, _ = self.resolve(model)
        await asyncio.to_thread(self._wake_if_asleep)
        body = {
            "model": served,
            "prompt": list(token_ids),
            "max_tokens": 1,
            "temperature": 0.0,
            "prompt_logprobs": 0,
        }
        rows = _json_or_raise(await self.post("/v1/completions", body), model)["choices"][0][
            "prompt_logprobs"
        ]
        scores = []
        for token, row in zip(token_ids[1:], rows[1:], strict=True):
            entry = row.get(str(token)) if row else None
            if entry is None:
                raise EngineError(f"vLLM's prompt_logprobs has no entry for token {token}")
            scores.append(float(entry["logprob"]))
        return scores

    async def forward_chat(self, body: dict[str, Any]) -> ForwardedResponse:
        """`/v1/chat/completions` forwarded to vLLM (see `chat_forward`)."""
        return await forward_chat(self, body)

    # ---- the step ---------------------------------------------------------------------------------
    async def pause(self) -> None:
        """Hold new requests; with sleep mode, wait for running ones and put the server to sleep."""
        self._open.clear()
        if not self.sleep_mode:
            return
        while self._in_flight:
            self._check_alive()
            await asyncio.sleep(_POLL_S)
        await asyncio.to_thread(self._admin, "/sleep?level=1", None)
        self._asleep = True

    async def resume(self) -> None:
        """Wake the server if it sleeps, then let held requests go."""
        try:
            await asyncio.to_thread(self._wake_if_asleep)
        finally:
            self._open.set()

    async def run(self, fn: Callable[[], T]) -> T:
        """fn() in a worker thread: generation runs in vLLM's own process, so nothing here competes."""
        return await asyncio.to_thread(fn)

    def release_idle_cache(self) -> int:
        """Nothing to release in this process (sleep mode frees vLLM's KV cache; see `pause`)."""
        return 0

    async def warm_up(self) -> None:
        """Nothing: the server compiled and profiled what it needs before answering /health."""

    async def close(self) -> None:
        """Stop the server; held requests fail with EngineClosedError."""
        self._closed = True
        self._open.set()
        await asyncio.to_thread(self.server.stop)
        self.server.remove_log()
        self._sync.close()
        for loop, client in list(self._clients.values()):
            if loop is asyncio.get_running_loop():
                await client.aclose()
            elif loop.is_running():  # our server's loop, in its own thread
                asyncio.run_coroutine_threadsafe(client.aclose(), loop)
        self._clients.clear()

    # ---- helpers ----------------------------------------------------------------------------------
    def _check_alive(self) -> None:
        if self._closed:
            raise EngineClosedError("the vLLM engine was closed")
        if not self.server.alive():
            raise self.unavailable(None)

    def unavailable(self, exc: BaseException | None) -> EngineUnavailableError:
        cause = "" if exc is None else f" ({type(exc).__name__}: {exc})"
        return EngineUnavailableError(
            f"vLLM's server is not answering{cause}. {self.server.describe_exit()}\nRestart the service "
            "(close the backend and register the model again): it resumes from the newest checkpoint."
        )

    def _admin(self, path: str, body: dict[str, Any] | None) -> None:
        try:
            response = self._sync.post(path, json=body)
        except httpx.TransportError as exc:
            raise self.unavailable(exc) from None
        if response.status_code >= 400:
            raise EngineError(f"vLLM {path} failed ({response.status_code}): {response.text[:500]}")

    def _wake_if_asleep(self) -> None:
        if self._asleep:
            self._admin("/wake_up", None)
            self._asleep = False


def _token_id(key: str) -> int:
    """A logprobs key as a token id ("token_id:42" with --return-tokens-as-token-ids, or "42")."""
    return int(key.removeprefix("token_id:"))


def _json_or_raise(response: httpx.Response, model: str) -> dict[str, Any]:
    """The JSON body of a vLLM answer, or the engine error its status means."""
    if response.status_code < 400:
        data: dict[str, Any] = response.json()
        return data
    text = response.text[:1000]
    if response.status_code == 404:
        raise ModelNotFoundError(model)
    if response.status_code == 400 and ("context length" in text or "maximum context" in text):
        raise ContextLengthError(text)
    raise EngineError(f"vLLM answered {response.status_code}: {text}")
