"""The `/v1/art/` training API of `art serve` on the wire: the JSON shapes both sides agree on.

Light on purpose (pydantic and our own client-side types only): `RemoteBackend` imports it without torch
or a web framework, and the server (`art.hub.api`) builds its FastAPI routes and OpenAPI schema on it.

Resources (see docs/remote.md):
- models: `POST /v1/art/models` (create or find), `GET /v1/art/models`, `GET /v1/art/models/{project}/{name}`;
- training jobs: `POST /v1/art/models/{project}/{name}/training-jobs` (gzip JSON body, `Idempotency-Key`
  header; returns the job at once), `GET /v1/art/training-jobs/{id}`, its events as pages
  (`GET .../events?after=N&limit=&wait=`) or server-sent events (`GET .../events/stream`);
- checkpoints: `GET .../checkpoints`, `GET .../checkpoints/{step}` (a tar of the folder),
  `DELETE .../checkpoints/{step}`, `DELETE .../checkpoints?keep=1&keep=3` (all but those and the newest);
  the ones set aside: `GET .../rejected-checkpoints`, `DELETE .../rejected-checkpoints` (purge).

Errors have OpenAI's shape, `{"error": {"message", "type", "param", "code"}}`, as on the inference routes.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from art.common.env import SERVE_DEFAULT_PORT
from art.record.storage import validate_name
from art.trajectories import TrajectoryGroup
from art.types import LoRAConfig, RejectedCheckpoint, TrainResult, TrainSpec

API_PREFIX = "/v1/art"
DEFAULT_PORT = SERVE_DEFAULT_PORT
DEFAULT_MAX_BODY_BYTES = 256 * 2**20
"""Largest request body (compressed, and again once decompressed) `art serve` accepts: 256 MiB."""
IDEMPOTENCY_HEADER = "Idempotency-Key"
MAX_WAIT_SECONDS = 60.0
"""Longest an events page may wait for a new event (`wait=`)."""

JobStatus = Literal["queued", "running", "completed", "failed"]
EventType = Literal[
    "queued", "started", "progress", "checkpoint_saved", "adapter_loaded", "completed", "failed"
]
TERMINAL_EVENTS: frozenset[str] = frozenset({"completed", "failed"})


def model_id(project: str, name: str) -> str:
    """The id of a served model: "project/name" (both are path-safe names)."""
    return f"{project}/{name}"


def _printable(value: str) -> str:
    """Refuse control characters (a newline would forge a line of the server's log)."""
    bad = next((c for c in value if ord(c) < 32 or 127 <= ord(c) < 160), None)
    if bad is not None:
        raise ValueError(f"must not contain control characters such as {bad!r}")
    return value


class ModelCreate(BaseModel):
    """`POST /v1/art/models`: serve a trainable model (or find it, when it is already served)."""

    model_config = ConfigDict(extra="forbid")

    project: Annotated[str, AfterValidator(lambda v: validate_name(v, "project"))]
    name: Annotated[str, AfterValidator(lambda v: validate_name(v, "model name"))]
    base_model: Annotated[str, AfterValidator(_printable)] = Field(
        min_length=1,
        max_length=4096,
        description="A Hugging Face id, a short name, or a folder on the server under one of its "
        "--base-model-root folders.",
    )
    lora_config: LoRAConfig | None = None


class ModelInfo(BaseModel):
    """A served model: where it stands and how to reach it for inference."""

    object: Literal["model"] = "model"
    id: str = Field(description='"project/name"')
    project: str
    name: str
    base_model: str
    lora_config: LoRAConfig
    step: int = Field(
        description="The newest published step; `name` serves it, `name@step` every loaded one."
    )
    record_id: str | None = Field(
        default=None,
        description="The id of the model's record on the server, made when it was first registered there: a "
        "client that trained this model refuses a server whose record has another id (its folder was "
        "emptied or replaced), instead of training step 1 again.",
    )
    inference_names: list[str] = Field(description="Names the OpenAI-compatible routes serve for this model.")
    hourly_cost_usd: float | None = Field(
        default=None,
        description="What the devices serving and training this model cost per hour (USD), from the server's "
        "`--gpu-cost-per-hour-usd` or its known GPUs; clients log a step's wall time x this as `costs/gpu`. "
        "None: unknown.",
    )


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelInfo]


class TrainingJobCreate(BaseModel):
    """The body of `POST .../training-jobs` (sent gzip-compressed: `Content-Encoding: gzip`)."""

    model_config = ConfigDict(extra="forbid")

    trajectory_groups: list[TrajectoryGroup] = Field(
        description="The step's groups, as `TrajectoryGroup` JSON."
    )
    spec: TrainSpec = Field(default_factory=TrainSpec, description="`Backend.train` keyword arguments.")
    base_step: int | None = Field(
        default=None, description="The step the client saw when it submitted (informative; recorded)."
    )


class TrainingJob(BaseModel):
    """One training step asked of a model, from submission to its result."""

    object: Literal["training_job"] = "training_job"
    id: str
    model: str = Field(description='"project/name"')
    status: JobStatus
    created_at: float
    started_at: float | None = None
    finished_at: float | None = None
    start_step: int | None = Field(default=None, description="The model's step when the job started.")
    base_step: int | None = None
    num_groups: int = 0
    num_trajectories: int = 0
    idempotency_key: str | None = None
    request_sha256: str = Field(description="Of the decompressed body: a reused key must carry the same one.")
    result: TrainResult | None = None
    error: str | None = None


class TrainingJobEvent(BaseModel):
    """Something that happened to a job; `id` is the cursor (1, 2, ... per job)."""

    id: int
    type: EventType
    created_at: float
    data: dict[str, Any] = Field(default_factory=dict)


class TrainingJobEventPage(BaseModel):
    """A page of a job's events after a cursor; `job` is the job as of this page."""

    object: Literal["list"] = "list"
    data: list[TrainingJobEvent]
    has_more: bool
    job: TrainingJob


class Checkpoint(BaseModel):
    """A complete checkpoint on the server."""

    step: int
    saved_at: str | None = None
    current: bool = Field(description="The step the model's own name serves.")
    loaded: bool = Field(description="Servable now as `name@step` (older ones stay on disk only).")


class CheckpointList(BaseModel):
    object: Literal["list"] = "list"
    data: list[Checkpoint]


class DeletedCheckpoints(BaseModel):
    deleted: list[int]
    kept: list[int]


class RejectedCheckpointList(BaseModel):
    """The checkpoints a model set aside (failed steps, corrupted ones), oldest first; kept for debugging,
    at most the server's `max_rejected_checkpoints`."""

    object: Literal["list"] = "list"
    data: list[RejectedCheckpoint]


class PurgedRejectedCheckpoints(BaseModel):
    deleted: list[str] = Field(description="Folder names under checkpoints/rejected/ that were deleted.")
