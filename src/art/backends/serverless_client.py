"""The HTTP client of the serverless training API (W&B's hosted training, and `art serve`'s `/v1/preview/`
routes, `art.hub.routes.serverless`): models, checkpoints, logs, training jobs and their events.

Light on purpose (httpx and pydantic): `art.serverless.ServerlessBackend` uses it. Every request carries
`Authorization: Bearer <api_key>` (the `WANDB_API_KEY` when none is given); an error answer raises
`ServerlessAPIError` with the status and the server's message.

    client = Client(api_key=key, base_url="http://gpu-box:7999/v1")
    model = await client.create_model(entity=None, project="p", name="m", base_model="Qwen/Qwen3-4B")
"""

from __future__ import annotations

import os
from typing import Any

import httpx
from pydantic import BaseModel

from art.trajectories import TrajectoryGroup

DEFAULT_BASE_URL = "https://api.training.wandb.ai/v1"


class Model(BaseModel):
    """A model on the serverless service."""

    id: str
    entity: str
    project: str
    name: str
    base_model: str
    run_id: str | None = None


class Checkpoint(BaseModel):
    id: str
    step: int
    metrics: dict[str, float] = {}


class TrainingJobEvent(BaseModel):
    """`training_started`, `gradient_step`, `training_ended` or `training_failed`, with its data."""

    id: str
    type: str
    data: dict[str, Any] = {}


class ServerlessAPIError(RuntimeError):
    """An error answer of the serverless API: `status` and the server's message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"serverless API answered {status}: {message}")
        self.status = status


class Client:
    """See the module docstring; `http_client` replaces the connection pool (then `close` leaves it open)."""

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        http_client: httpx.AsyncClient | None = None,
        timeout: float = 120.0,
    ) -> None:
        key = api_key if api_key is not None else os.environ.get("WANDB_API_KEY")
        if key is None:
            raise ValueError(
                "ServerlessBackend needs an API key: pass api_key=... (for art serve, its key; for W&B, yours) "
                "or set WANDB_API_KEY"
            )
        self.api_key = key
        self.base_url = (base_url or DEFAULT_BASE_URL).rstrip("/") + "/"
        self._owns = http_client is None
        self._http = http_client or httpx.AsyncClient(timeout=timeout)

    async def close(self) -> None:
        if self._owns:
            await self._http.aclose()

    async def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        response = await self._http.request(
            method,
            self.base_url + path.lstrip("/"),
            headers={"Authorization": f"Bearer {self.api_key}"},
            **kwargs,
        )
        if response.status_code >= 400:
            try:
                body = response.json()
                error = body.get("error", body) if isinstance(body, dict) else body
                message = error.get("message", error) if isinstance(error, dict) else error
            except ValueError:
                message = response.text
            raise ServerlessAPIError(response.status_code, str(message))
        return response.json() if response.content else None

    async def create_model(
        self, *, entity: str | None, project: str, name: str, base_model: str, return_existing: bool = True
    ) -> Model:
        body = {"entity": entity, "project": project, "name": name, "base_model": base_model,
                "return_existing": return_existing}  # fmt: skip
        return Model.model_validate(await self._call("POST", "preview/models", json=body))

    async def log(self, *, model_id: str, trajectory_groups: list[TrajectoryGroup], split: str) -> None:
        groups = [g.model_dump(mode="json") for g in trajectory_groups]
        await self._call(
            "POST", f"preview/models/{model_id}/log",
            json={"model_id": model_id, "trajectory_groups": groups, "split": split},
        )  # fmt: skip

    async def list_checkpoints(
        self, *, model_id: str, order: str = "asc", limit: int | None = None
    ) -> list[Checkpoint]:
        """Every checkpoint (all pages), or the first `limit` in `order`."""
        out: list[Checkpoint] = []
        after: str | None = None
        while True:
            params: dict[str, Any] = {"order": order, "limit": limit or 100}
            if after is not None:
                params["after"] = after
            page = await self._call("GET", f"preview/models/{model_id}/checkpoints", params=params)
            out += [Checkpoint.model_validate(c) for c in page.get("data") or []]
            if limit is not None or not page.get("has_more") or not out:
                return out[:limit] if limit is not None else out
            after = out[-1].id

    async def delete_checkpoints(self, *, model_id: str, steps: list[int]) -> dict[str, Any]:
        result = await self._call("DELETE", f"preview/models/{model_id}/checkpoints", json={"steps": steps})
        return dict(result or {})

    async def create_training_job(
        self, *, model_id: str, trajectory_groups: list[TrajectoryGroup], experimental_config: dict[str, Any]
    ) -> str:
        groups = [g.model_dump(mode="json") for g in trajectory_groups]
        body = {"model_id": model_id, "trajectory_groups": groups, "experimental_config": experimental_config}
        return str((await self._call("POST", "preview/training-jobs", json=body))["id"])

    async def job_events(self, *, job_id: str, after: str | None = None) -> list[TrainingJobEvent]:
        """The job's events after the cursor `after` (all pages)."""
        out: list[TrainingJobEvent] = []
        while True:
            params = {"after": after} if after is not None else {}
            page = await self._call("GET", f"preview/training-jobs/{job_id}/events", params=params)
            events = [TrainingJobEvent.model_validate(e) for e in page.get("data") or []]
            out += events
            if not page.get("has_more") or not events:
                return out
            after = events[-1].id
