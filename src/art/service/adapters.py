"""Which checkpoints of one trainable model the engine serves, and under which names.

- `{name}@{step}`: the `max_loaded` steps used most recently (by training or by requests) stay loaded;
  the least recently used is unloaded first, never the published one.
- `{name}`: an alias of the published (newest) step, from the service's start on (after a restart too).
- A step that is still on disk but not loaded is loaded again when a request names it (`OnDemandEngine`),
  so a rollout that began a few training steps ago, or a user comparing an old step, gets an answer
  instead of a 404. Only steps up to the published one: a newer step on disk failed its canary, or is
  being published, and must not be served.

Bookkeeping is guarded by a lock: the service (its event loop, and the engine's worker thread) and the
server's thread (requests naming an unloaded step) both reach it. Loading reads the adapter from disk and
runs where the service runs all torch work (`run_blocking`, the engine's worker thread).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

from art.engines.base import (
    ChatForwardingEngine,
    Engine,
    ForwardedResponse,
    GenerateOutput,
    GenerateRequest,
    ModelNotFoundError,
)
from art.record.storage import ModelStorage

T = TypeVar("T")
logger = logging.getLogger(__name__)

DEFAULT_MAX_LOADED_ADAPTERS = 4


class ServedAdapters:
    """The loaded steps of one model (most recently used last) and the alias of the newest."""

    def __init__(
        self,
        engine: Engine,
        name: str,
        storage: ModelStorage,
        *,
        max_loaded: int = DEFAULT_MAX_LOADED_ADAPTERS,
        run_blocking: Callable[[Callable[[], Any]], Awaitable[Any]],
    ) -> None:
        if max_loaded < 1:
            raise ValueError(f"max_loaded_adapters must be at least 1 (the newest step), got {max_loaded}")
        self.engine = engine
        self.name = name
        self.storage = storage
        self.max_loaded = max_loaded
        self._run_blocking = run_blocking
        self._lock = threading.Lock()
        self._loaded: OrderedDict[int, None] = OrderedDict()
        self._on_disk: set[int] = set()
        self.published: int | None = None

    def served_name(self, step: int) -> str:
        """`{name}@{step}`."""
        return f"{self.name}@{step}"

    def step_of(self, model: str) -> int | None:
        """N for a model name `{name}@N`, else None."""
        prefix = f"{self.name}@"
        rest = model[len(prefix) :] if model.startswith(prefix) else ""
        return int(rest) if rest.isdigit() else None

    @property
    def loaded_steps(self) -> list[int]:
        """Loaded steps, least recently used first."""
        with self._lock:
            return list(self._loaded)

    def scan_disk(self) -> None:
        """Learn which complete checkpoints are on disk (at start; later the service reports changes)."""
        steps = set(self.storage.checkpoint_steps())
        with self._lock:
            self._on_disk = steps

    def load(self, step: int, path: str | os.PathLike[str] | None = None) -> None:
        """Serve checkpoint `step` as `{name}@{step}` (blocking: reads it from disk), then unload the least
        recently used steps beyond `max_loaded`. `path`: another folder to read it from (tests)."""
        folder = self.storage.checkpoint_dir(step) if path is None else path
        self.engine.load_adapter(self.served_name(step), folder, checkpoint_step=step)
        with self._lock:
            self._loaded[step] = None
            self._loaded.move_to_end(step)
            self._on_disk.add(step)
        self._evict()

    def publish(self, step: int) -> None:
        """Point `{name}` at the loaded step `step`: from now on it is the newest servable one."""
        self.engine.set_alias(self.name, self.served_name(step))
        with self._lock:
            self.published = step
        self._evict()

    def forget(self, step: int) -> None:
        """Stop serving `step` (its checkpoint was deleted, or failed its canary)."""
        with self._lock:
            was_loaded = step in self._loaded
            self._loaded.pop(step, None)
            self._on_disk.discard(step)
        if was_loaded:
            self._unload(step)

    def unload_except(self, keep: set[int]) -> list[int]:
        """Unload the loaded steps not in `keep` (never the published one); they stay servable from disk."""
        with self._lock:
            victims = [s for s in self._loaded if s not in keep and s != self.published]
            for step in victims:
                del self._loaded[step]
        for step in victims:
            self._unload(step)
        return victims

    def _evict(self) -> None:
        with self._lock:
            excess = len(self._loaded) - self.max_loaded
            victims = [s for s in self._loaded if s != self.published][: max(excess, 0)]
            for step in victims:
                del self._loaded[step]
        for step in victims:
            self._unload(step)

    def _unload(self, step: int) -> None:
        with contextlib.suppress(ModelNotFoundError):  # already gone (e.g. unloaded by hand)
            self.engine.unload_adapter(self.served_name(step))

    def unloaded_names(self) -> list[str]:
        """Names of steps a request may still use although they are not loaded (they load on demand)."""
        with self._lock:
            if self.published is None:
                return []
            steps = sorted(s for s in self._on_disk if s <= self.published and s not in self._loaded)
        return [self.served_name(s) for s in steps]

    async def ensure(self, model: str) -> bool:
        """Load the step that `model` names if it is servable and not loaded; True if it now is loaded.

        Loading waits for the engine's worker (e.g. until a training step in progress ends, which holds
        every request anyway). A checkpoint deleted meanwhile leaves the name unknown (404)."""
        step = self.step_of(model)
        if step is None:
            return False
        with self._lock:
            if step in self._loaded:
                self._loaded.move_to_end(step)
                return True
            servable = self.published is not None and step <= self.published and step in self._on_disk
        if not servable:
            return False
        try:
            await self._run_blocking(lambda: self.load(step))
        except (FileNotFoundError, OSError, ValueError) as exc:
            logger.warning("could not load %s on demand: %s", self.served_name(step), exc)
            self.forget(step)
            return False
        logger.info("loaded %s again on demand", self.served_name(step))
        return True


class OnDemandEngine:
    """The engine as the server sees it: an older step a request names is loaded before the request runs.

    It is an `Engine` of its own, every member of the protocol written out (the wrapped engine's attributes
    copied, its methods called): nothing else of the wrapped engine shows through. An engine whose server
    answers chat requests itself gets `OnDemandForwardingEngine` (see `on_demand`)."""

    def __init__(self, engine: Engine, adapters: ServedAdapters) -> None:
        self._engine = engine
        self._adapters = adapters
        self.base_model_name = engine.base_model_name
        self.tokenizer = engine.tokenizer
        self.chat_template = engine.chat_template
        self.max_model_len = engine.max_model_len

    def model_names(self) -> list[str]:
        """The engine's names, and the older steps that load on demand."""
        return [*self._engine.model_names(), *self._adapters.unloaded_names()]

    def load_adapter(self, name: str, path: Any, *, checkpoint_step: int | None = None) -> None:
        self._engine.load_adapter(name, path, checkpoint_step=checkpoint_step)

    def unload_adapter(self, name: str) -> None:
        self._engine.unload_adapter(name)

    def set_alias(self, alias: str, target: str) -> None:
        self._engine.set_alias(alias, target)

    async def generate(self, request: GenerateRequest) -> AsyncGenerator[GenerateOutput, None]:
        """The engine's stream for `request`, after loading the step it names if needed."""
        for attempt in range(3):
            await self._adapters.ensure(request.model)
            outputs = self._engine.generate(request)
            try:
                first = await anext(outputs)
            except ModelNotFoundError:
                await outputs.aclose()
                # Unloaded again between loading and submitting (many old steps requested at once): retry.
                if attempt == 2 or self._adapters.step_of(request.model) is None:
                    raise
                continue
            except StopAsyncIteration:
                return
            try:
                yield first
                async for output in outputs:
                    yield output
            finally:
                await outputs.aclose()
            return

    @property
    def compute_dtype(self) -> str:
        return self._engine.compute_dtype

    async def pause(self) -> None:
        await self._engine.pause()

    async def resume(self) -> None:
        await self._engine.resume()

    async def score(self, model: str, token_ids: Sequence[int], *, as_generated: bool = False) -> list[float]:
        """The engine's score, after loading the step `model` names if needed."""
        await self._adapters.ensure(model)
        return await self._engine.score(model, token_ids, as_generated=as_generated)

    async def run(self, fn: Callable[[], T]) -> T:
        return await self._engine.run(fn)

    def release_idle_cache(self) -> int:
        return self._engine.release_idle_cache()

    async def warm_up(self) -> None:
        await self._engine.warm_up()

    async def close(self) -> None:
        await self._engine.close()


class OnDemandForwardingEngine(OnDemandEngine):
    """`OnDemandEngine` over an engine that answers chat requests itself (`ChatForwardingEngine`: vLLM): a
    forwarded request's step is loaded first too."""

    def __init__(self, engine: ChatForwardingEngine, adapters: ServedAdapters) -> None:
        assert isinstance(engine, Engine)
        super().__init__(engine, adapters)
        self._forwarding = engine

    async def forward_chat(self, body: dict[str, Any]) -> ForwardedResponse:
        """The engine's answer to a chat request body, after loading the step its `model` names if needed."""
        model = body.get("model")
        if isinstance(model, str):
            await self._adapters.ensure(model)
        return await self._forwarding.forward_chat(body)


def on_demand(engine: Engine, adapters: ServedAdapters) -> OnDemandEngine:
    """The engine the server serves: `engine` with older steps loaded on demand, forwarding chat requests
    where `engine` does (`ChatForwardingEngine`)."""
    if isinstance(engine, ChatForwardingEngine):
        return OnDemandForwardingEngine(engine, adapters)
    return OnDemandEngine(engine, adapters)
