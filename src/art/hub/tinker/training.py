"""Sessions and training models of the Tinker API, on the hub's models (one record each) and their trainer.

`create_lora_training_client` serves a new model `tinker/{session}-train-{n}` through the hub, as
`POST /v1/art/models` would. `forward_backward` and `forward` run the trainer's forward pass on the
datums (`Trainer.datum_losses`; gradients accumulate in the trainer between calls); `optim_step` is one
step of the service's step lifecycle (`ModelService.run_step`: AdamW on those gradients, a checkpoint,
loaded, canaried, published), so every optimiser step is an ordinary checkpoint of the record that the
OpenAI routes serve as `name@step`. `save_state` and `save_weights_for_sampler` name the current
checkpoint (`tinker.json` in the record keeps the names); `load_state` and
`create_training_client_from_state` make the named checkpoint's weights (and optimizer) the next step.

Every request is checked before anything is queued (`BadInput`, `NotFound`); a refused request writes
nothing.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from art.backends.remote_protocol import ModelCreate
from art.hub.models import HostedModel, HubError, ServiceHub, check_available, check_base_model
from art.hub.tinker import ids
from art.hub.tinker.futures import Chain, Futures, Result
from art.hub.tinker.ids import BadInput, NotFound, TinkerPath
from art.hub.tinker.wire import ForwardBackward, forward_backward_output
from art.record.storage import atomic_write_text
from art.training.token_losses import REFUSED, REQUIRED_INPUTS, TOKEN_LOSSES
from art.training.trainer import StepReport, Trainer
from art.types import LoRAConfig

MAX_LORA_RANK = 128
"""The largest LoRA rank a training client may ask for."""

LORA_ALPHA = 32
"""The adapter's alpha for every rank (Tinker's clients set only the rank)."""

META_FILE = "tinker.json"


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@dataclass
class Session:
    """One SDK client's session: what it created, by counter."""

    id: str
    user_metadata: dict[str, Any] = field(default_factory=dict)
    model_ids: list[str] = field(default_factory=list)
    sampler_ids: list[str] = field(default_factory=list)


@dataclass
class TrainingModel:
    """A Tinker training model: the hub's model behind it, its ordered work, its names (`tinker.json`)."""

    id: str
    hosted: HostedModel
    meta: dict[str, Any]
    chain: Chain = field(default_factory=Chain)

    @property
    def meta_path(self) -> Path:
        return Path(self.hosted.service.storage.root) / META_FILE

    def save_meta(self) -> None:
        self.meta["last_request_time"] = now_iso()
        atomic_write_text(self.meta_path, json.dumps(self.meta, indent=1, sort_keys=True) + "\n")

    def step_of(self, path: TinkerPath) -> int:
        """The record step a checkpoint path names (NotFound naming it)."""
        entry = self.meta["checkpoints"].get(path.checkpoint_id)
        if entry is None or entry["step"] not in self.hosted.service.storage.checkpoint_steps():
            raise NotFound(f"no checkpoint {path} on this server")
        step: int = entry["step"]
        return step


class TinkerTraining:
    """Sessions and training models of one `art serve` (see the module docstring)."""

    def __init__(self, hub: ServiceHub, futures: Futures, aliases: dict[str, str] | None = None) -> None:
        self.hub = hub
        self.futures = futures
        self.aliases = dict(aliases or {})  # a client's base model name -> what the hub loads
        self.sessions: dict[str, Session] = {}
        self._models: dict[str, TrainingModel] = {}
        self._starting: dict[str, asyncio.Future[TrainingModel]] = {}

    # ---- sessions and models -----------------------------------------------------------------------
    def create_session(self, user_metadata: dict[str, Any] | None) -> str:
        session = Session(ids.new_session_id(), dict(user_metadata or {}))
        self.sessions[session.id] = session
        return session.id

    def session(self, session_id: str) -> Session:
        """The session `session_id`; one this server made before a restart is taken up again (its client
        goes on), anything else is NotFound."""
        found = self.sessions.get(session_id)
        if found is None:
            if not ids.is_session_id(session_id):
                raise NotFound(f"no session {session_id!r} on this server (create_session makes one)")
            found = self.sessions[session_id] = Session(session_id)
        return found

    async def model(self, model_id: str) -> TrainingModel:
        """The training model `model_id` (one still starting is waited for; NotFound naming it)."""
        if model_id in self._starting:
            await asyncio.wait({self._starting[model_id]})
        found = self._models.get(model_id)
        if found is not None:
            return found
        hosted = self.hub.models.get((ids.PROJECT, ids.record_name(model_id)))
        meta_path = None if hosted is None else Path(hosted.service.storage.root) / META_FILE
        if hosted is None or meta_path is None or not meta_path.exists():
            raise NotFound(f"no training model {model_id!r} on this server")
        found = TrainingModel(model_id, hosted, json.loads(meta_path.read_text(encoding="utf-8")))
        self._models[model_id] = found
        return found

    async def check_base_model(self, base_model: str, rank: int) -> None:
        """BadInput for a rank above the limit; NotFound for a base model this server cannot load."""
        if not 1 <= rank <= MAX_LORA_RANK:
            raise BadInput(f"LoRA rank {rank} is outside what this server trains (1 to {MAX_LORA_RANK})")
        source = self.aliases.get(base_model, base_model)
        try:
            check_base_model(source, self.hub.base_model_roots)
            await asyncio.to_thread(check_available, source)
        except HubError as e:
            raise NotFound(f"base model {base_model!r} cannot be served here: {e}") from None

    def create_model(
        self, session_id: str, seq: int, base_model: str, rank: int, meta: dict[str, Any]
    ) -> str:
        """Start serving a new training model (after `check_base_model`); returns its request id."""
        meta = {"base_model": base_model, "lora_rank": rank, **meta}
        model_id, task = self._begin(session_id, seq, meta)

        async def created() -> Result:
            await task
            return {"type": "create_model", "model_id": model_id}

        return self.futures.submit(created())

    async def create_from_state(self, session_id: str, seq: int, path: str, *, optimizer: bool) -> str:
        """A new training model (same base model and rank) whose first step is checkpoint `path`."""
        self.session(session_id)
        source, _ = await self.source(path)
        meta = {key: source.meta[key] for key in ("base_model", "lora_rank")}
        _, task = self._begin(session_id, seq, meta)

        async def loaded() -> Result:
            return await self.load(await task, path, optimizer=optimizer)

        return self.futures.submit(loaded())

    async def load_state(self, model_id: str, path: str, *, optimizer: bool) -> str:
        """Queue `load` of checkpoint `path` into an existing model (its next step); a request id."""
        model = await self.model(model_id)
        await self.source(path)
        return self.futures.submit(model.chain.then(lambda: self.load(model, path, optimizer=optimizer)))

    def _begin(
        self, session_id: str, seq: int, meta: dict[str, Any]
    ) -> tuple[str, asyncio.Future[TrainingModel]]:
        session = self.session(session_id)
        model_id = ids.model_id(session_id, seq)
        taken = (ids.PROJECT, ids.record_name(model_id)) in self.hub.models
        if taken or model_id in self._models or model_id in self._starting:
            raise BadInput(f"training model {model_id} exists already (model_seq_id {seq} was used)")
        session.model_ids.append(model_id)
        task = asyncio.ensure_future(self._start(model_id, {"model_id": model_id, "checkpoints": {}, **meta}))
        self._starting[model_id] = task
        task.add_done_callback(lambda _: self._starting.pop(model_id, None))
        return model_id, task

    async def _start(self, model_id: str, meta: dict[str, Any]) -> TrainingModel:
        rank = int(meta["lora_rank"])
        spec = ModelCreate(
            project=ids.PROJECT,
            name=ids.record_name(model_id),
            base_model=self.aliases.get(meta["base_model"], meta["base_model"]),
            lora_config=LoRAConfig(r=rank, alpha=LORA_ALPHA),
        )
        hosted, _ = await self.hub.create(spec)
        model = TrainingModel(model_id, hosted, {"created": now_iso(), **meta})
        model.save_meta()
        self._models[model_id] = model
        return model

    async def info(self, model_id: str) -> dict[str, Any]:
        model = await self.model(model_id)
        base = model.meta["base_model"]
        return {
            "type": "get_info",
            "model_id": model_id,
            "model_data": {"arch": "llama", "model_name": base, "tokenizer_id": self._tokenizer_id(base)},
            "is_lora": True,
            "lora_rank": model.meta["lora_rank"],
            "model_name": base,
            "optimizer_config": {"type": "adamw"},
        }

    async def all_models(self) -> list[TrainingModel]:
        """Every training model this server has (restored ones included), oldest first."""
        found = []
        for project, name in list(self.hub.models):
            if project == ids.PROJECT and "-train-" in name:
                session, seq = name.rsplit("-train-", 1)
                try:
                    found.append(await self.model(ids.model_id(session, int(seq))))
                except (NotFound, ValueError):
                    continue
        return sorted(found, key=lambda m: str(m.meta.get("created", "")))

    async def delete(self, model_id: str, checkpoint_id: str) -> None:
        """Forget a checkpoint's name (the record's step stays: other names, or the OpenAI routes, may use it)."""
        model = await self.model(model_id)
        if model.meta["checkpoints"].pop(checkpoint_id, None) is None:
            raise NotFound(f"no checkpoint {checkpoint_id!r} of {model_id} on this server")
        model.save_meta()

    def _tokenizer_id(self, base_model: str) -> str | None:
        """A local folder the SDK's `get_tokenizer()` can load offline (the base model's, when it is one)."""
        source = Path(self.aliases.get(base_model, base_model)).expanduser()
        return str(source.resolve()) if source.is_dir() and ":" not in str(source.resolve()) else None

    # ---- forward, backward, step ---------------------------------------------------------------------
    async def forward_backward(self, request: ForwardBackward) -> str:
        """Queue a forward (and backward) pass after checking the loss and every datum; a request id."""
        model = await self.model(request.model_id)
        check_loss(request)
        trainer = model.hosted.service.trainer
        vocab = trainer.vocab_size if trainer is not None else None
        for i, datum in enumerate(request.datums):
            top = max([*datum.tokens, *(int(t) for t in datum.inputs["target_tokens"])])
            if vocab is not None and (top >= vocab or min(datum.tokens) < 0):
                raise BadInput(
                    f"datum {i}: token id {top} is outside the model's vocabulary (0 to {vocab - 1})"
                )

        def run(trainer: Trainer) -> list[tuple[list[float], list[float]]]:
            return trainer.datum_losses(
                request.datums, request.loss_fn, request.config, backward=not request.forward_only
            )

        async def work() -> Result:
            results = await model.hosted.service.on_trainer(run)
            total = sum(sum(loss) for _, loss in results)
            return forward_backward_output(results, {"loss:sum": total})

        return self.futures.submit(model.chain.then(work))

    async def optim_step(self, model_id: str, adam: dict[str, Any]) -> str:
        """Queue AdamW on the accumulated gradients as one step of the record; a request id."""
        model = await self.model(model_id)
        params = check_adam(adam)

        def update(current_step: int) -> StepReport:
            trainer = model.hosted.service.trainer
            assert trainer is not None
            grad_norm, skipped = trainer.optimizer_step(**params)
            metrics = {"grad_norm": grad_norm, "learning_rate": params["learning_rate"]}
            return StepReport(metrics, 0, 0, skipped, updated=skipped is None)

        async def work() -> Result:
            manifest = {"kind": "tinker", "optim_step": adam}
            result = await model.hosted.service.run_step(update, groups=(), manifest=manifest)
            model.save_meta()
            return {
                "metrics": {
                    "grad_norm:mean": result.metrics.get("grad_norm", 0.0),
                    "learning_rate:mean": params["learning_rate"],
                    "step:max": float(result.step),
                }
            }

        return self.futures.submit(model.chain.then(work))

    # ---- names of checkpoints ------------------------------------------------------------------------
    async def save(self, model_id: str, name: str | None, kind: str, *, overwrite: bool = True) -> str:
        """Name the model's current checkpoint (once the work before it is done); a request id."""
        model = await self.model(model_id)
        if name is not None:
            path = TinkerPath(model_id, kind, ids.check_name(name))
            if not overwrite and path.checkpoint_id in model.meta["checkpoints"]:
                raise BadInput(
                    f"checkpoint {path} exists; save it under another name, or pass overwrite=True"
                )

        async def work() -> Result:
            step = model.hosted.service.step
            if name is None:
                return {"step": step}
            entry = {"step": step, "time": now_iso(), "type": ids.KINDS[kind]}
            model.meta["checkpoints"][path.checkpoint_id] = entry
            model.save_meta()
            return {
                "path": str(path),
                "type": "save_weights" if kind == "weights" else "save_weights_for_sampler",
            }

        return self.futures.submit(model.chain.then(work))

    async def source(self, path: str) -> tuple[TrainingModel, int]:
        """The model and step a checkpoint path names (NotFound naming the path)."""
        parsed = TinkerPath.parse(path)
        try:
            model = await self.model(parsed.model_id)
        except NotFound:
            raise NotFound(f"no checkpoint {path} on this server (no model {parsed.model_id})") from None
        return model, model.step_of(parsed)

    async def load(self, model: TrainingModel, path: str, *, optimizer: bool) -> Result:
        """Make checkpoint `path` (its adapter, and optimizer with `optimizer`) the model's next step."""
        source, step = await self.source(path)
        folder = source.hosted.service.storage.checkpoint_dir(step)
        source.hosted.service.storage.verify_checkpoint(step)
        if source.meta["lora_rank"] != model.meta["lora_rank"]:
            raise BadInput(f"{path} has LoRA rank {source.meta['lora_rank']}, not {model.meta['lora_rank']}")

        def update(current_step: int) -> StepReport:
            trainer = model.hosted.service.trainer
            assert trainer is not None
            trainer.load(folder)
            if not optimizer:
                trainer.optimizer.state.clear()
            return StepReport({}, 0, 0, f"loaded {path}", updated=True)

        manifest = {"kind": "tinker_load", "from": path, "optimizer": optimizer}
        await model.hosted.service.run_step(update, groups=(), manifest=manifest)
        model.save_meta()
        return {"type": "load_weights", "path": path, "model_id": model.id}


def check_loss(request: ForwardBackward) -> None:
    """BadInput for a loss this server does not compute (naming those it does) or a datum without the
    inputs its loss reads."""
    computed = ", ".join(TOKEN_LOSSES)
    if request.loss_fn not in TOKEN_LOSSES:
        why = REFUSED.get(request.loss_fn, "unknown loss")
        raise BadInput(
            f"loss_fn {request.loss_fn!r} is not computed here ({why}); this server computes {computed}"
        )
    if not request.datums:
        raise BadInput("forward_backward got no data")
    for i, datum in enumerate(request.datums):
        missing = [k for k in REQUIRED_INPUTS[request.loss_fn] if k not in datum.inputs]
        if missing:
            raise BadInput(f"datum {i}: loss_fn {request.loss_fn} needs loss_fn_inputs {', '.join(missing)}")


def check_adam(adam: dict[str, Any]) -> dict[str, Any]:
    """`Trainer.optimizer_step`'s arguments from the SDK's AdamParams (BadInput for nonsense)."""
    lr = float(adam.get("learning_rate", 1e-4))
    betas = (float(adam.get("beta1", 0.9)), float(adam.get("beta2", 0.95)))
    eps, decay = float(adam.get("eps", 1e-12)), float(adam.get("weight_decay", 0.0))
    clip = float(adam.get("grad_clip_norm", 0.0))
    numbers = [lr, *betas, eps, decay, clip]
    if not all(math.isfinite(x) for x in numbers) or lr < 0 or eps < 0 or decay < 0 or clip < 0:
        raise BadInput(f"adam_params {adam}: every value must be a finite number >= 0")
    if not all(0 <= b < 1 for b in betas):
        raise BadInput(f"adam_params beta1={betas[0]}, beta2={betas[1]}: each must be in [0, 1)")
    return {
        "learning_rate": lr,
        "betas": betas,
        "eps": eps,
        "weight_decay": decay,
        "max_grad_norm": clip if clip > 0 else math.inf,
    }


def checkpoint_json(model: TrainingModel, checkpoint_id: str, entry: dict[str, Any]) -> dict[str, Any]:
    """A named checkpoint as the SDK's `Checkpoint`."""
    kind, name = checkpoint_id.split("/", 1)
    folder = model.hosted.service.storage.checkpoint_dir(entry["step"])
    size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) if folder.exists() else 0
    return {
        "checkpoint_id": checkpoint_id,
        "checkpoint_type": entry["type"],
        "time": entry["time"],
        "tinker_path": str(TinkerPath(model.id, kind, name)),
        "size_bytes": size,
        "public": False,
    }


def run_json(model: TrainingModel) -> dict[str, Any]:
    """A training model as the SDK's `TrainingRun`."""
    return {
        "training_run_id": model.id,
        "base_model": model.meta["base_model"],
        "model_owner": "art serve",
        "is_lora": True,
        "lora_rank": model.meta["lora_rank"],
        "last_request_time": model.meta.get("last_request_time") or now_iso(),
        "user_metadata": {str(k): str(v) for k, v in (model.meta.get("user_metadata") or {}).items()},
    }
