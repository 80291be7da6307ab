"""`RemoteBackend`: the `Backend` protocol over HTTP, against `art serve` on this or another machine.

The agent's code runs where its environment is; the service runs where the compute is. Switching is one
line: `backend = RemoteBackend("http://gpu-box:7999", api_key=...)` instead of `LocalBackend()`.
`model.openai_client()` then talks to the server's OpenAI-compatible routes with the same key, and
`model.log(...)` writes the record on this side as before; the server keeps checkpoints and the jobs'
metrics.

A step (`train`) is a training job (`art.backends.remote_protocol`): the groups travel as gzip-compressed JSON with
an idempotency key derived from the model, the step the client last saw and the request's bytes, so a
submission retried after a lost connection, or repeated by a restarted client with the same groups from
the same step, is the same job and never a second step. The client then follows the job's events (long
polling after a cursor), showing the service's progress in a tqdm bar, and rides out lost connections and
server restarts for up to `reconnect_seconds`. Light: httpx and pydantic only, no torch.

Example:
    backend = RemoteBackend("http://127.0.0.1:7999", api_key=open(".art/.serve/api_key").read().strip())
    await model.register(backend)
    result = await backend.train(model, groups, learning_rate=1e-5)
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import io
import json
import logging
import os
import shutil
import tarfile
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import httpx

from art.backends.base import (
    RefusesSFT,
    StepWaits,
    inference_name,
    prepare_groups_for_training,
    prompted_model_registration,
    train_spec_from_kwargs,
)
from art.backends.remote_protocol import (
    API_PREFIX,
    DEFAULT_PORT,
    IDEMPOTENCY_HEADER,
    Checkpoint,
    CheckpointList,
    ModelInfo,
    PurgedRejectedCheckpoints,
    RejectedCheckpointList,
    TrainingJob,
    TrainingJobEventPage,
    model_id,
)
from art.common.env import ART_API_KEY
from art.common.env import read as read_env
from art.common.waits import waiting
from art.metrics.taxonomy import reference_train_metrics
from art.model import Backend
from art.record.storage import checkpoint_folder_step
from art.trajectories import TrajectoryGroup
from art.types import LoRAConfig, Registration, RejectedCheckpoint, TrainResult, TrainSpec

if TYPE_CHECKING:
    from art.model import Model, TrainableModel

logger = logging.getLogger(__name__)

API_KEY_ENV = ART_API_KEY  # the variable's name; defined in the table, art.common.env
GZIP_LEVEL = 1  # JSON of trajectories shrinks ~5-10x at level 1 already; higher levels cost CPU per step
EVENTS_WAIT_SECONDS = 30.0


class RemoteError(RuntimeError):
    """`art serve` refused or failed a request: `status` (0: unreachable), the server's message and field."""

    def __init__(
        self, status: int, message: str, *, param: str | None = None, code: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.param = param
        self.code = code


class RemoteValueError(RemoteError, ValueError):
    """The server found the request malformed (400/422): the message names the field."""


class RemoteRecordError(RemoteError):
    """The server's record of a model is not the one this client trained (`RemoteBackend.register` says
    which and what to do); nothing was trained."""

    def __init__(self, message: str) -> None:
        super().__init__(409, message, code="record_mismatch")


class TrainingJobFailed(RuntimeError):
    """A training job failed on the server; `job` is its record (`job.error` says why)."""

    def __init__(self, job: TrainingJob, reason: str) -> None:
        super().__init__(f"training job {job.id} of {job.model} failed on the server: {reason}")
        self.job = job


def encode_training_job(
    model: str, groups: Sequence[TrajectoryGroup], spec: TrainSpec, base_step: int | None
) -> tuple[bytes, str]:
    """(the gzip-compressed body of a training job, its idempotency key).

    The key hashes the model, the step the client last saw and the uncompressed request: the same groups
    from the same step are the same job, whoever sends them and however often."""
    body = {
        "trajectory_groups": [g.model_dump(mode="json") for g in groups],
        "spec": spec.model_dump(mode="json"),
        "base_step": base_step,
    }
    raw = json.dumps(body, allow_nan=True, separators=(",", ":")).encode("utf-8")
    key = hashlib.sha256(f"{model}\n{base_step}\n".encode() + raw).hexdigest()
    return gzip.compress(raw, compresslevel=GZIP_LEVEL, mtime=0), key


def _safe_members(tar: tarfile.TarFile, top: str) -> list[tarfile.TarInfo]:
    """The archive's members, if every one is a plain file or folder under `top` (else ValueError)."""
    members = tar.getmembers()
    for m in members:
        parts = Path(m.name).parts
        if (
            m.name.startswith("/")
            or ".." in parts
            or not parts
            or parts[0] != top
            or not (m.isfile() or m.isdir())
        ):
            raise ValueError(f"refusing a checkpoint archive with member {m.name!r}")
    return members


class RemoteBackend(RefusesSFT, Backend):
    """The `Backend` protocol against `art serve` (see the module docstring).

    Args:
        url: the server, e.g. "http://127.0.0.1:7999" (a trailing "/v1" is accepted).
        api_key: its key; None reads the `ART_API_KEY` environment variable (once, here), else no key.
        progress: show the service's training progress in a tqdm bar.
        timeout: seconds for one ordinary request.
        reconnect_seconds: how long to keep retrying when the server cannot be reached (restarts included).
        start_timeout: seconds `register` may wait for the server to load a model.

    Example:
        backend = art.RemoteBackend("http://gpu-box:7999", api_key="...")  # a machine running `art serve`
        await model.register(backend)
        result = await model.train(groups, config=art.TrainConfig(learning_rate=1e-5))
    """

    # `art serve`'s training API takes RL steps only: fine-tune where the model is.
    SFT_REFUSAL: ClassVar[str] = (
        "RemoteBackend: art serve trains RL steps only, not SFT ({project}/{name}); run "
        "supervised fine-tuning where the model is, with art.LocalBackend or `art sft FILE`"
    )

    def __init__(
        self,
        url: str = f"http://127.0.0.1:{DEFAULT_PORT}",
        api_key: str | None = None,
        *,
        progress: bool = True,
        timeout: float = 60.0,
        reconnect_seconds: float = 600.0,
        start_timeout: float = 1800.0,
    ) -> None:
        url = url.strip().rstrip("/")
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"url={url!r}: give the server's address, e.g. http://127.0.0.1:{DEFAULT_PORT}")
        self.url = url.removesuffix("/v1")
        self.api_key = api_key if api_key is not None else read_env(API_KEY_ENV)
        self.progress = progress
        self.timeout = timeout
        self.reconnect_seconds = reconnect_seconds
        self.start_timeout = start_timeout
        self._clients: dict[int, tuple[asyncio.AbstractEventLoop, httpx.AsyncClient]] = {}
        self._steps: dict[tuple[str, str], int] = {}
        self._refused: dict[tuple[str, str], RemoteRecordError] = {}  # models whose server record was refused
        self._hourly_cost: dict[
            tuple[str, str], float | None
        ] = {}  # per model, from the server at registration

    @classmethod
    def from_launch(
        cls, cluster_name: str = "art", *, path: str | os.PathLike[str] = ".art", **kwargs: Any
    ) -> RemoteBackend:
        """Connect to the server `art launch` started on SkyPilot cluster `cluster_name` (its endpoint from
        SkyPilot, its key from the file `art launch` wrote under `path`). Needs the `launch` extra."""
        from art.cluster.launch import launch_connection

        url, api_key = launch_connection(cluster_name, Path(path))
        return cls(url, api_key, **kwargs)

    # ---- HTTP ------------------------------------------------------------------------------------
    def _client(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        entry = self._clients.get(id(loop))
        if entry is None or entry[0] is not loop or entry[1].is_closed:
            headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
            client = httpx.AsyncClient(base_url=self.url, headers=headers, timeout=self.timeout)
            self._clients[id(loop)] = (loop, client)
            return client
        return entry[1]

    def _error(self, response: httpx.Response, what: str) -> RemoteError:
        try:
            error = response.json()["error"]
            message, param, code = str(error.get("message")), error.get("param"), error.get("code")
        except (ValueError, KeyError, TypeError, AttributeError):
            message, param, code = response.text[:500] or response.reason_phrase, None, None
        status = response.status_code
        if status == 401:
            return RemoteError(
                401,
                f"{what}: art serve at {self.url} refused the API key ({message}). Pass api_key=... or set "
                f"{API_KEY_ENV}; the server printed where its key file is.",
                code=code,
            )
        kind = RemoteValueError if status in (400, 413, 415, 422) else RemoteError
        return kind(status, f"{what}: {message} (HTTP {status})", param=param, code=code)

    async def _request(self, method: str, path: str, *, what: str, **kwargs: Any) -> httpx.Response:
        """One request, retried while the server cannot be reached (or answers 502/503/504) for up to
        `reconnect_seconds`: every request of this API is safe to repeat."""
        deadline = time.monotonic() + self.reconnect_seconds
        delay, warned = 0.25, False
        while True:
            try:
                response = await self._client().request(method, path, **kwargs)
            except httpx.TransportError as e:
                problem = f"{type(e).__name__}: {e}"
            else:
                if response.status_code < 400:
                    return response
                if response.status_code not in (502, 503, 504):
                    raise self._error(response, what)
                problem = f"HTTP {response.status_code}"
            if time.monotonic() + delay > deadline:
                raise RemoteError(0, f"{what}: cannot reach art serve at {self.url} ({problem}); gave up after "
                                  f"{self.reconnect_seconds:.0f} s")  # fmt: skip
            if not warned:
                logger.warning("%s: art serve at %s is unreachable (%s); retrying", what, self.url, problem)
                warned = True
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)

    def _model_path(self, model: Model) -> str:
        return f"{API_PREFIX}/models/{model.project}/{model.name}"

    # ---- the Backend protocol --------------------------------------------------------------------
    async def register(self, model: Model) -> Registration:
        """Serve `model` on the server (idempotent) and point its OpenAI client there."""
        if not model.trainable:
            return prompted_model_registration(model, "RemoteBackend")
        lora: LoRAConfig | None = getattr(model, "lora_config", None)
        body = {
            "project": model.project,
            "name": model.name,
            "base_model": getattr(model, "base_model"),  # noqa: B009 - a TrainableModel field
            "lora_config": None if lora is None else lora.model_dump(),
        }
        with waiting(f"registering {model.name} on {self.url} (it loads {body['base_model']})", every=15):
            response = await self._request(
                "POST", f"{API_PREFIX}/models", json=body, what=f"registering {model.name!r}",
                timeout=httpx.Timeout(self.timeout, read=self.start_timeout),
            )  # fmt: skip
        info = ModelInfo.model_validate(response.json())
        self._check_record(model, info)
        self._steps[(model.project, model.name)] = info.step
        self._hourly_cost[(model.project, model.name)] = info.hourly_cost_usd
        return Registration(base_url=f"{self.url}/v1", api_key=self.api_key or "", step=info.step)

    def _check_record(self, model: Model, info: ModelInfo) -> None:
        """Refuse (`RemoteRecordError`) a server whose record of `model` is not the one this client trained:
        another record id than the one this client's `model.json` remembers (`server_record_id`), or, the
        first time, a server behind the steps this client's history already trained. Training on would
        reuse step numbers and mix two policies in one record. Remembers the server's record id.

        Runs at every registration, also the one a request makes by itself when the server no longer knows
        the model (`_on_model`): a server restarted on an empty folder is refused there too."""
        stored = model.storage.read_model_json() or {}
        known = stored.get("server_record_id")
        trained = [
            int(e["step"]) for e in model.storage.read_history() if any(k.startswith("train/") for k in e)
        ]
        newest = max(trained, default=0)
        who = f"{model.project}/{model.name}"
        advice = (
            "Nothing was trained. Start the server again on the folder (--path) that holds this model's record; "
            "or, to train a new record from step 0, use another model name (or base_path) on this side."
        )
        key = (model.project, model.name)
        self._refused.pop(key, None)
        if info.record_id is not None and known is not None and known != info.record_id:
            raise self._refuse(
                key,
                f"art serve at {self.url} holds another record of {who} than the one this client trained: the "
                f"server's record {info.record_id} is at step {info.step}, this client trained record {known} "
                f"(its history, in {model.storage.root}, reaches step {newest}). The server's folder was emptied "
                f"or replaced, and training on would take step {info.step + 1} again. {advice}",
            )
        if known is None and newest > info.step:
            raise self._refuse(
                key,
                f"art serve at {self.url} serves {who} at step {info.step}, but this client's record (in "
                f"{model.storage.root}) already trained up to step {newest}: the server does not hold the steps "
                f"this client trained, and training on would take step {info.step + 1} again. {advice}",
            )
        if known is not None and info.step < newest:
            logger.warning(
                "art serve at %s serves %s at step %d, older than step %d in this client's history (its newer "
                "checkpoints were set aside, e.g. found corrupted at its start): the next step is %d again",
                self.url, who, info.step, newest, info.step + 1,
            )  # fmt: skip
        if info.record_id is not None and known != info.record_id:
            model.storage.write_model_json({**stored, "server_record_id": info.record_id})

    def _refuse(self, key: tuple[str, str], message: str) -> RemoteRecordError:
        """Remember that `key`'s server record was refused (every request about it checks again first)."""
        error = self._refused[key] = RemoteRecordError(message)
        return error

    async def _on_model(
        self, model: Model, method: str, suffix: str, *, what: str, **kwargs: Any
    ) -> httpx.Response:
        """A request about `model`; if the server no longer knows it (a server started afresh elsewhere),
        register it again once and repeat. While its record is refused (`_check_record`), it is checked
        again first: nothing about the model is asked of a server that does not hold its record."""
        if (model.project, model.name) in self._refused:
            await self.register(model)
        try:
            return await self._request(method, self._model_path(model) + suffix, what=what, **kwargs)
        except RemoteError as e:
            if e.status != 404 or not model.trainable or suffix.startswith("/checkpoints/"):
                raise
        await self.register(model)
        return await self._request(method, self._model_path(model) + suffix, what=what, **kwargs)

    def supports_automatic_train_step_metrics(self) -> bool:
        """Yes: `model.log` adds `time/step_wall_s`, measured here on the client, to each step's "train"
        row, and `costs/gpu` when the server prices its devices (`automatic_gpu_cost_per_hour_usd`)."""
        return True

    def automatic_gpu_cost_per_hour_usd(self, model: Model) -> float | None:
        """What the server's devices for `model` cost per hour (USD), as it said at registration (its
        `art serve --gpu-cost-per-hour-usd`, or its known GPUs); None when it does not know."""
        return self._hourly_cost.get((model.project, model.name)) if model.trainable else None

    def _model_inference_name(self, model: Model, step: int | None = None) -> str:
        """The name a rollout should send: `"{name}@{step}"`, the newest step this client has seen by
        default (the reference's hook, which `Model.get_inference_name` asks). A model not served here
        keeps its own name."""
        known = self._steps.get((model.project, model.name)) if model.trainable else None
        return inference_name(model, known, step)

    async def get_step(self, model: TrainableModel) -> int:
        """The newest published step of `model` on the server."""
        response = await self._on_model(model, "GET", "", what=f"getting the step of {model.name!r}")
        step = ModelInfo.model_validate(response.json()).step
        self._steps[(model.project, model.name)] = step
        return step

    async def _get_step(self, model: TrainableModel) -> int:
        """The reference's name for `get_step` (its Backend protocol's)."""
        return await self.get_step(model)

    async def train(
        self, model: TrainableModel, trajectory_groups: Iterable[TrajectoryGroup], **kwargs: Any
    ) -> TrainResult:
        """One training step on the server. Keyword arguments are `art.TrainSpec` fields, validated here as
        `LocalBackend.train` validates them; its metrics have the reference's names, as `LocalBackend.train`'s
        (the job's own result keeps the server's). Raises `TrainingJobFailed` if the step fails on the server."""
        spec = train_spec_from_kwargs(**kwargs)
        groups = prepare_groups_for_training(
            trajectory_groups, without_logprobs=spec.allow_training_without_logprobs
        )
        known = self._steps.get((model.project, model.name))
        base_step = known if known is not None else await self.get_step(model)
        body, key = await asyncio.to_thread(
            encode_training_job, model_id(model.project, model.name), groups, spec, base_step
        )
        response = await self._on_model(
            model, "POST", "/training-jobs", what=f"submitting a training step of {model.name!r}",
            content=body, headers={"Content-Encoding": "gzip", "Content-Type": "application/json",
                                   IDEMPOTENCY_HEADER: key},
        )  # fmt: skip
        job = TrainingJob.model_validate(response.json())
        result = await self.wait_for_job(job.id)
        self._steps[(model.project, model.name)] = result.step
        model.record_trained_step(groups, result, base_step)
        return result.model_copy(update={"metrics": reference_train_metrics(result.metrics, groups)})

    async def delete_checkpoints(self, model: TrainableModel, steps_to_keep: Sequence[int]) -> None:
        """Delete every checkpoint on the server except `steps_to_keep` and the newest."""
        await self._on_model(
            model, "DELETE", "/checkpoints", what=f"deleting checkpoints of {model.name!r}",
            params=[("keep", int(s)) for s in steps_to_keep],
        )  # fmt: skip

    async def close(self) -> None:
        """Close this client's connections (the server keeps running: other clients may use it)."""
        clients, self._clients = self._clients, {}
        for loop, client in clients.values():
            if loop is asyncio.get_running_loop():
                await client.aclose()

    async def __aenter__(self) -> RemoteBackend:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ---- jobs and checkpoints --------------------------------------------------------------------
    async def wait_for_job(self, job_id: str) -> TrainResult:
        """Follow a training job to its end (progress bar included) and return its result; raises
        `TrainingJobFailed` with the server's reason. Works for a job submitted by an earlier process."""
        from tqdm.auto import tqdm

        cursor, bar = 0, None
        waits = StepWaits(f"training job {job_id}")
        try:
            while True:
                response = await self._request(
                    "GET", f"{API_PREFIX}/training-jobs/{job_id}/events",
                    params={"after": cursor, "limit": 1000, "wait": EVENTS_WAIT_SECONDS},
                    timeout=self.timeout + EVENTS_WAIT_SECONDS, what=f"following training job {job_id}",
                )  # fmt: skip
                page = TrainingJobEventPage.model_validate(response.json())
                for event in page.data:
                    cursor = event.id
                    waits.on_event(event.type, event.data)
                    if event.type == "progress":
                        if bar is None:
                            start = page.job.start_step
                            desc = f"step {start + 1}: training" if start is not None else "training"
                            bar = tqdm(
                                total=int(event.data["total"]),
                                desc=desc.strip(),
                                unit="mb",
                                disable=not self.progress,
                            )
                        bar.update(int(event.data["micro_batch"]) - bar.n)
                        bar.set_postfix(loss=f"{float(event.data['loss']):.4g}", refresh=False)
                    elif event.type == "completed":
                        return TrainResult.model_validate(event.data["result"])
                    elif event.type == "failed":
                        raise TrainingJobFailed(page.job, str(event.data.get("reason")))
        finally:
            waits.__exit__()
            if bar is not None:
                bar.close()

    async def training_job(self, job_id: str) -> TrainingJob:
        """A training job's record as the server has it."""
        response = await self._request(
            "GET", f"{API_PREFIX}/training-jobs/{job_id}", what=f"getting job {job_id}"
        )
        return TrainingJob.model_validate(response.json())

    async def recent_training_jobs(self, model: TrainableModel, limit: int = 20) -> list[TrainingJob]:
        """The model's newest training jobs on the server, newest first."""
        response = await self._on_model(
            model, "GET", "/training-jobs", params={"limit": limit}, what=f"listing jobs of {model.name!r}"
        )
        return [TrainingJob.model_validate(job) for job in response.json()]

    async def rejected_checkpoints(self, model: TrainableModel) -> list[RejectedCheckpoint]:
        """The checkpoints the server set aside for `model` (failed steps, corrupted ones), oldest first."""
        response = await self._on_model(
            model, "GET", "/rejected-checkpoints", what=f"listing set-aside checkpoints of {model.name!r}"
        )
        return RejectedCheckpointList.model_validate(response.json()).data

    async def purge_rejected_checkpoints(self, model: TrainableModel) -> list[str]:
        """Delete every checkpoint the server set aside for `model`; returns their folder names."""
        response = await self._on_model(
            model, "DELETE", "/rejected-checkpoints", what=f"purging set-aside checkpoints of {model.name!r}"
        )
        return PurgedRejectedCheckpoints.model_validate(response.json()).deleted

    async def list_checkpoints(self, model: TrainableModel) -> list[Checkpoint]:
        """The model's complete checkpoints on the server, oldest first."""
        response = await self._on_model(
            model, "GET", "/checkpoints", what=f"listing checkpoints of {model.name!r}"
        )
        return CheckpointList.model_validate(response.json()).data

    async def _experimental_pull_model_checkpoint(
        self,
        model: TrainableModel,
        *,
        step: int | Literal["latest"] | None = None,
        local_path: str | None = None,
        verbose: bool = False,
    ) -> str:
        """Download a checkpoint from the server (the newest by default) and return the local folder it is in.

        Without `local_path` it lands where `LocalBackend` would have written it
        (`{base_path}/{project}/models/{name}/checkpoints/{step:04d}`), so a local service can resume from
        it. With `local_path` it goes into that folder instead, which must be new or empty
        (FileExistsError otherwise); a folder that already holds this step's complete checkpoint is
        returned as it is, without a download (as `LocalBackend._experimental_pull_model_checkpoint`).

        Example:
            folder = await backend._experimental_pull_model_checkpoint(model, step=3, local_path="ckpt-3")
        """
        if step is None or step == "latest":
            step = await self.get_step(model)
        final = Path(local_path) if local_path is not None else model.storage.checkpoint_dir(step)
        if checkpoint_folder_step(final) == step:
            return str(final)
        if local_path is not None and final.exists() and (not final.is_dir() or any(final.iterdir())):
            raise FileExistsError(
                f"local_path {final} is not empty; give a new or empty folder for checkpoint {step}"
            )
        response = await self._on_model(
            model, "GET", f"/checkpoints/{step}", what=f"downloading checkpoint {step} of {model.name!r}",
            timeout=httpx.Timeout(self.timeout, read=self.start_timeout),
        )  # fmt: skip
        await asyncio.to_thread(self._unpack, response.content, step, final)
        if verbose:
            print(f"checkpoint {step} of {model.name} -> {final}")
        return str(final)

    @staticmethod
    def _unpack(archive: bytes, step: int, final: Path) -> None:
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{step:04d}-", dir=final.parent))
        try:
            with tarfile.open(fileobj=io.BytesIO(archive), mode="r") as tar:
                members = _safe_members(tar, f"{step:04d}")
                if hasattr(tarfile, "data_filter"):
                    tar.extractall(tmp, members=members, filter="data")
                else:  # pragma: no cover - Python < 3.11.4
                    tar.extractall(tmp, members=members)
            if final.exists():  # empty, or an incomplete checkpoint folder of ours (no manifest)
                shutil.rmtree(final)
            os.replace(tmp / f"{step:04d}", final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
