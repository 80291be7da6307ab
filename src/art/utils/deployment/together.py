"""Deploying a LoRA checkpoint to Together: the checkpoint is zipped to S3 and presigned
(`art.utils.s3.archive_and_presign_step_url`), Together fetches it as an adapter of the model's base model
(`POST /models`), and the upload job is followed until it completes (`GET /jobs/{id}`, every 15 s, at
most 5 minutes). A job for the same checkpoint that did not fail is reused, not repeated.

Needs `TOGETHER_API_KEY`; `TOGETHER_BASE_URL` overrides the API's address (default
https://api.together.xyz/v1).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import httpx
from pydantic import BaseModel

from art.common.errors import LoRADeploymentTimedOutError, UnsupportedBaseModelDeploymentError
from art.record.s3 import archive_and_presign_step_url
from art.utils.deployment.config import DeploymentConfig

if TYPE_CHECKING:
    from art.model import TrainableModel

TOGETHER_SUPPORTED_BASE_MODELS = [
    "meta-llama/Meta-Llama-3.1-8B-Instruct",
    "meta-llama/Meta-Llama-3.1-70B-Instruct",
    "Qwen/Qwen2.5-14B-Instruct",
    "Qwen/Qwen2.5-72B-Instruct",
]
POLL_SECONDS = 15.0
TIMEOUT_SECONDS = 300.0
# Together's answer when the adapter was uploaded before: the deployment exists, which is what was asked.
_ALREADY_EXISTS = "409 Client Error: Conflict for url: https://api.together.ai/api/admin/entity/Model"


class TogetherDeploymentConfig(DeploymentConfig):
    """Where the checkpoint's zip goes (`s3_bucket`, default `BACKUP_BUCKET`; `prefix`), and whether to wait
    for Together to finish (`wait_for_completion`)."""

    s3_bucket: str | None = None
    prefix: str | None = None
    wait_for_completion: bool = True


class TogetherJobStatus(StrEnum):
    QUEUED = "Queued"
    RUNNING = "Running"
    COMPLETE = "Complete"
    FAILED = "Failed"


class TogetherJob(BaseModel):
    status: TogetherJobStatus
    job_id: str
    model_name: str
    failure_reason: str | None


def _client() -> httpx.AsyncClient:
    key = os.environ.get("TOGETHER_API_KEY")
    if not key:
        raise ValueError("TOGETHER_API_KEY is not set, cannot deploy LoRA to Together")
    base = os.environ.get("TOGETHER_BASE_URL", "https://api.together.xyz/v1").rstrip("/")
    return httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=60.0)


def _checkpoint_id(model: TrainableModel, step: int) -> str:
    return f"{model.project}-{model.name}-{step}"


def _status(status: str, message: str | None) -> TogetherJobStatus:
    if status == "Error" and message and _ALREADY_EXISTS in message:
        return TogetherJobStatus.COMPLETE
    if status in ("Bad", "Error"):
        return TogetherJobStatus.FAILED
    if status == "Retry Queued":
        return TogetherJobStatus.QUEUED
    return TogetherJobStatus(status)


async def _get(path: str) -> Any:
    async with _client() as http:
        response = await http.get(path)
        response.raise_for_status()
        return response.json()


async def _job(job_id: str, verbose: bool = False) -> TogetherJob:
    result = await _get(f"/jobs/{job_id}")
    if verbose:
        print(f"Together job: {json.dumps(result, indent=2)}")
    last = (result.get("status_updates") or [{}])[-1]
    status = _status(result["status"], last.get("message"))
    reason = last.get("message") if status == TogetherJobStatus.FAILED else result.get("failure_reason")
    return TogetherJob(
        status=status, job_id=job_id, model_name=result["args"]["modelName"], failure_reason=reason
    )


async def _existing_job(model: TrainableModel, step: int) -> str | None:
    jobs = sorted((await _get("/jobs"))["data"], key=lambda j: j["updated_at"], reverse=True)
    wanted = _checkpoint_id(model, step)
    return next((j["job_id"] for j in jobs if wanted in j["args"]["modelName"]), None)


async def _upload(model: TrainableModel, url: str, step: int, verbose: bool) -> str:
    if model.base_model not in TOGETHER_SUPPORTED_BASE_MODELS:
        raise UnsupportedBaseModelDeploymentError(
            message=f"Base model {model.base_model} is not supported for serverless LoRA deployment by "
            f"Together. Supported models: {TOGETHER_SUPPORTED_BASE_MODELS}"
        )
    body = {
        "model_name": _checkpoint_id(model, step),
        "model_source": url,
        "model_type": "adapter",
        "base_model": model.base_model,
        "description": f"Deployed from ART. Project: {model.project}. Model: {model.name}. Step: {step}",
    }
    async with _client() as http:
        response = await http.post("/models", json=body)
        if response.status_code != 200:
            raise RuntimeError(f"Together refused the upload ({response.status_code}): {response.text[:500]}")
        result = response.json()
    if verbose:
        print(f"Uploaded to Together: {result}")
    return str(result["data"]["job_id"])


async def _wait(job_id: str, verbose: bool) -> TogetherJob:
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while True:
        job = await _job(job_id, verbose)
        if job.status in (TogetherJobStatus.COMPLETE, TogetherJobStatus.FAILED):
            return job
        if time.monotonic() >= deadline:
            raise LoRADeploymentTimedOutError(
                message=f"LoRA deployment timed out after {TIMEOUT_SECONDS:.0f} s. Job ID: {job_id}"
            )
        await asyncio.sleep(POLL_SECONDS)


async def deploy_to_together(
    model: TrainableModel,
    checkpoint_path: str,
    step: int,
    config: TogetherDeploymentConfig,
    verbose: bool = False,
) -> str:
    """Deploy the checkpoint to Together (see the module docstring); returns the model name to call."""
    url = await archive_and_presign_step_url(
        model_name=model.name, project=model.project, step=step, s3_bucket=config.s3_bucket,
        prefix=config.prefix, verbose=verbose, checkpoint_path=checkpoint_path,
    )  # fmt: skip
    existing = await _existing_job(model, step)
    previous = await _job(existing, verbose) if existing is not None else None
    if previous is None or previous.status == TogetherJobStatus.FAILED:
        job_id = await _upload(model, url, step, verbose)
    else:
        job_id = previous.job_id
        print(
            f"Together already has {model.name} step {step} (job {job_id}, {previous.status.value}): not uploaded again"
        )
    job = await (_wait(job_id, verbose) if config.wait_for_completion else _job(job_id, verbose))
    if job.status == TogetherJobStatus.FAILED:
        raise RuntimeError(
            f"Together deployment failed for {model.name} step {step}. Job ID: {job.job_id}. "
            f"Reason: {job.failure_reason}"
        )
    return job.model_name
