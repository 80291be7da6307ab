"""K inference replicas as Ray actors, behind the service's one endpoint: an `Engine` that spreads requests.

Each `InferenceReplica` actor runs the engine the options name (`art.engines.factory.start_engine`: the
torch engine, or vLLM's server) on its own node, placed by a placement group (strategy SPREAD: one replica
per node while nodes last). `RayReplicasEngine` is what the service and its server see:

- a request goes to the replica with the fewest requests in flight; the prompt is rendered here, the replica
  gets token ids and returns the sequence's outputs in one piece (streams reach the client when it ends);
- a replica that dies mid-request (`ActorDiedError`, `ActorUnavailableError`) is marked down and the request
  is sent again to another (a sequence is all or nothing, so nothing is half-answered); Ray restarts the
  actor (`max_restarts=-1`, on the same bundle), and we start its engine again and replay every loaded
  adapter and alias onto it before it takes requests again;
- adapters and aliases go to every replica that is up; each replica reads the checkpoint folder itself, so
  checkpoints must be on storage every node reads;
- the canary scores the probe on every replica that is up: replicas that disagree fail it.

Inference does not pause for a training step: replicas share nothing with the trainer ranks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import ray
from ray.exceptions import ActorDiedError, ActorUnavailableError, RayTaskError
from ray.util.placement_group import PlacementGroup, placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from art.chat.chat_template import ChatTemplate
from art.cluster.ray_cluster import actor_resources, cluster_resources
from art.engines.base import (
    EngineError,
    EngineUnavailableError,
    GenerateOutput,
    GenerateRequest,
)
from art.types import RuntimeOptions

T = TypeVar("T")
logger = logging.getLogger(__name__)

REPLICA_DOWN = (ActorDiedError, ActorUnavailableError)
PLACEMENT_TIMEOUT_S = 300.0
RESTART_TIMEOUT_S = 600.0
CANARY_AGREEMENT = 1e-4  # replicas run the same code on the same files: their scores agree to float noise


class InferenceReplica:
    """One replica (a Ray actor): an engine and what it serves. Restarted by Ray, it starts empty."""

    def __init__(self, options: RuntimeOptions, base_model: str, served_name: str) -> None:
        self.options = options.model_copy(update={"ray_address": None, "inference_replicas": 1})
        self.base_model = base_model
        self.served_name = served_name
        self.engine: Any = None

    async def start(self, device: str) -> dict[str, Any]:
        """Load the model and start the engine (once per incarnation); who and what this replica is."""
        from art.base_model.loader import choose_dtype, load_model_and_tokenizer
        from art.engines.factory import start_engine

        if self.engine is None:
            dtype = choose_dtype(self.options.dtype, device)
            model, tokenizer = await asyncio.to_thread(
                load_model_and_tokenizer, self.base_model, dtype=dtype, device=device
            )
            self.engine = await start_engine(
                self.options,
                base_model=self.base_model,
                served_name=self.served_name,
                model=model,
                tokenizer=tokenizer,
                device=device,
                cuda_devices=1 if device.startswith("cuda") else 0,
            )
        return {
            "pid": os.getpid(),
            "node_id": ray.get_runtime_context().get_node_id(),
            "max_model_len": self.engine.max_model_len,
            "compute_dtype": self.engine.compute_dtype,
        }

    async def generate(self, request: GenerateRequest) -> list[GenerateOutput]:
        """Every output of one sequence."""
        async with contextlib.aclosing(self.engine.generate(request)) as outputs:
            return [output async for output in outputs]

    async def load_adapter(self, name: str, path: str, checkpoint_step: int | None) -> None:
        await self.engine.run(lambda: self.engine.load_adapter(name, path, checkpoint_step=checkpoint_step))

    def unload_adapter(self, name: str) -> None:
        self.engine.unload_adapter(name)

    def set_alias(self, alias: str, target: str) -> None:
        self.engine.set_alias(alias, target)

    async def score(self, model: str, token_ids: list[int], as_generated: bool) -> list[float]:
        scores: list[float] = await self.engine.score(model, token_ids, as_generated=as_generated)
        return scores

    async def warm_up(self) -> None:
        await self.engine.warm_up()

    def pid(self) -> int:
        return os.getpid()


@dataclass
class _Replica:
    index: int
    actor: Any
    up: bool = False
    in_flight: int = 0
    restarts: int = 0
    info: dict[str, Any] = field(default_factory=dict)
    served: int = 0  # requests answered (tests and logs)


class RayReplicasEngine:
    """The `Engine` the service sees in front of its Ray replicas (see the module docstring)."""

    def __init__(
        self,
        replicas: list[_Replica],
        group: PlacementGroup,
        *,
        device: str,
        served_name: str,
        tokenizer: Any,
    ) -> None:
        self.replicas = replicas
        self.group = group
        self.device = device
        self.base_model_name = served_name
        self.tokenizer = tokenizer
        self.chat_template = ChatTemplate(tokenizer)
        self.max_model_len = int(replicas[0].info["max_model_len"])
        self._compute_dtype = str(replicas[0].info["compute_dtype"])
        self._adapters: dict[str, tuple[str, int | None]] = {}
        self._aliases: dict[str, str] = {}
        self._state = threading.Lock()  # adapters, aliases and which replicas are up change together
        self._restarting: set[asyncio.Task[None]] = set()
        self._closed = False

    # ---- names ----------------------------------------------------------------------------------
    @property
    def compute_dtype(self) -> str:
        return self._compute_dtype

    def model_names(self) -> list[str]:
        with self._state:
            return [self.base_model_name, *self._adapters, *self._aliases]

    def _broadcast(self, call: Callable[[Any], Any]) -> None:
        """call(actor) on every replica that is up, waiting for all (under the state lock); a replica that
        is down now gets the state when it comes back."""
        refs = [(r, call(r.actor)) for r in self.replicas if r.up]
        for replica, ref in refs:
            try:
                ray.get(ref)
            except REPLICA_DOWN:
                replica.up = False  # its next request restarts it

    def load_adapter(
        self, name: str, path: str | os.PathLike[str], *, checkpoint_step: int | None = None
    ) -> None:
        with self._state:
            self._adapters[name] = (str(path), checkpoint_step)
            self._broadcast(lambda a: a.load_adapter.remote(name, str(path), checkpoint_step))

    def unload_adapter(self, name: str) -> None:
        with self._state:
            self._adapters.pop(name, None)
            self._broadcast(lambda a: a.unload_adapter.remote(name))

    def set_alias(self, alias: str, target: str) -> None:
        with self._state:
            self._aliases[alias] = target
            self._broadcast(lambda a: a.set_alias.remote(alias, target))

    # ---- requests ---------------------------------------------------------------------------------
    async def generate(self, request: GenerateRequest) -> AsyncGenerator[GenerateOutput, None]:
        """The sequence from the least busy replica; sent again elsewhere if that replica dies."""
        tried: set[int] = set()
        while True:
            replica = await self._pick(tried)
            replica.in_flight += 1
            try:
                outputs = await replica.actor.generate.remote(request)
            except REPLICA_DOWN as exc:
                tried.add(replica.index)
                self._down(replica, exc)
                continue
            except RayTaskError as exc:  # the engine's own error (unknown model, bad ids): the caller's
                raise _cause(exc) from None
            finally:
                replica.in_flight -= 1
            replica.served += 1
            for output in outputs:
                yield output
            return

    async def _pick(self, tried: set[int]) -> _Replica:
        """The up replica with the fewest requests in flight, preferring ones not tried for this request;
        waits for a restart when none is up."""
        waited = 0.0
        while True:
            if self._closed:
                raise EngineUnavailableError("the Ray replicas were closed")
            up = [r for r in self.replicas if r.up]
            fresh = [r for r in up if r.index not in tried] or up
            if fresh:
                return min(fresh, key=lambda r: (r.in_flight, r.index))
            if waited > RESTART_TIMEOUT_S:
                raise EngineUnavailableError(
                    f"no inference replica came back within {RESTART_TIMEOUT_S:.0f} s of failing"
                )
            await asyncio.sleep(0.5)
            waited += 0.5

    def _down(self, replica: _Replica, exc: BaseException) -> None:
        """Mark `replica` down (once) and bring it back in the background."""
        if not replica.up:
            return
        replica.up = False
        logger.warning(
            "inference replica %d (pid %s) is gone (%s); its requests go to the others while Ray restarts it",
            replica.index,
            replica.info.get("pid"),
            type(exc).__name__,
        )
        task = asyncio.ensure_future(self._bring_back(replica))
        self._restarting.add(task)
        task.add_done_callback(self._restarting.discard)

    async def _bring_back(self, replica: _Replica) -> None:
        """Wait for Ray's restart, start the engine again, replay adapters and aliases, mark it up."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + RESTART_TIMEOUT_S
        while not self._closed:
            try:
                replica.info = await replica.actor.start.remote(self.device)
                await asyncio.to_thread(self._replay, replica)
                replica.restarts += 1
                logger.info("inference replica %d is back (pid %s)", replica.index, replica.info["pid"])
                return
            except REPLICA_DOWN:
                if loop.time() > deadline:
                    logger.error("inference replica %d did not come back", replica.index)
                    return
                await asyncio.sleep(1.0)
            except Exception:  # it came back but cannot serve what the others serve: leave it down, loudly
                logger.exception(
                    "inference replica %d restarted but failed to take up the served adapters", replica.index
                )
                return

    def _replay(self, replica: _Replica) -> None:
        with self._state:  # adapters first: an alias must name a loaded adapter
            ray.get([replica.actor.load_adapter.remote(n, p, s) for n, (p, s) in self._adapters.items()])
            ray.get([replica.actor.set_alias.remote(a, t) for a, t in self._aliases.items()])
            replica.up = True

    async def score(self, model: str, token_ids: Sequence[int], *, as_generated: bool = False) -> list[float]:
        """The probe's logprobs, computed by every replica that is up; ones that disagree are an error."""
        up = [r for r in self.replicas if r.up]
        if not up:
            raise EngineUnavailableError("no inference replica is up")
        try:
            scores = await asyncio.gather(
                *(r.actor.score.remote(model, list(token_ids), as_generated) for r in up)
            )
        except RayTaskError as exc:
            raise _cause(exc) from None
        first: list[float] = scores[0]
        for replica, other in zip(up[1:], scores[1:], strict=True):
            worst = max((abs(a - b) for a, b in zip(first, other, strict=True)), default=0.0)
            if worst > CANARY_AGREEMENT:
                raise EngineError(
                    f"inference replicas {up[0].index} and {replica.index} serve {model} differently "
                    f"(logprobs differ by up to {worst:.3g})"
                )
        return first

    # ---- the service's hooks ------------------------------------------------------------------------
    async def pause(self) -> None:
        """Nothing to hold: the replicas share no device or model with the trainer."""

    async def resume(self) -> None:
        """See `pause`."""

    async def run(self, fn: Callable[[], T]) -> T:
        """fn() in a worker thread (the heavy work is on the replicas and ranks)."""
        return await asyncio.to_thread(fn)

    def release_idle_cache(self) -> int:
        return 0

    async def warm_up(self) -> None:
        await asyncio.gather(*(r.actor.warm_up.remote() for r in self.replicas if r.up))

    async def close(self) -> None:
        """Kill every replica and free their placement group."""
        self._closed = True
        for task in list(self._restarting):
            task.cancel()
        for replica in self.replicas:
            with contextlib.suppress(Exception):
                ray.kill(replica.actor, no_restart=True)
        with contextlib.suppress(Exception):
            remove_placement_group(self.group)


def _cause(exc: RayTaskError) -> BaseException:
    """The engine's own exception inside a Ray task error (e.g. ModelNotFoundError: a 404, not a 500)."""
    cause = exc.cause
    return cause if isinstance(cause, BaseException) else exc


async def start_replicas(
    options: RuntimeOptions, *, base_model: str, served_name: str, tokenizer: Any
) -> RayReplicasEngine:
    """Place `options.inference_replicas` replicas on the cluster (joined by `art.cluster.ray_cluster.connect`) and
    start their engines; a cluster that cannot place them within minutes is an error naming what it has."""
    each = actor_resources(options, cluster_resources())
    bundle = {"CPU": each["num_cpus"], **({"GPU": each["num_gpus"]} if each["num_gpus"] else {})}
    group = placement_group([bundle] * options.inference_replicas, strategy="SPREAD")
    try:
        await asyncio.wait_for(group.ready(), PLACEMENT_TIMEOUT_S)
    except TimeoutError:
        remove_placement_group(group)
        raise RuntimeError(
            f"Ray could not place {options.inference_replicas} inference replica(s) of {bundle} within "
            f"{PLACEMENT_TIMEOUT_S:.0f} s; the cluster has {cluster_resources(free=True)} free"
        ) from None
    actor_class = ray.remote(InferenceReplica)
    device = "cuda:0" if each["num_gpus"] else "cpu"  # Ray gives each actor its GPU as cuda:0
    replicas = [
        _Replica(
            index=i,
            actor=actor_class.options(
                num_cpus=each["num_cpus"],
                num_gpus=each["num_gpus"],
                max_restarts=-1,
                scheduling_strategy=PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=i),
            ).remote(options, base_model, served_name),
        )
        for i in range(options.inference_replicas)
    ]
    try:
        infos = await asyncio.gather(*(r.actor.start.remote(device) for r in replicas))
    except BaseException:
        for replica in replicas:
            ray.kill(replica.actor, no_restart=True)
        remove_placement_group(group)
        raise
    for replica, info in zip(replicas, infos, strict=True):
        replica.info, replica.up = info, True
    return RayReplicasEngine(replicas, group, device=device, served_name=served_name, tokenizer=tokenizer)
