"""Backing a model's folder up to S3 and pulling it back, with the AWS CLI, as the reference does.

A model's folder (`{art_path}/{project}/models/{name}/`: checkpoints, history, trajectories, state) maps to
`s3://{bucket}/{prefix}/{project}/models/{name}/`, one checkpoint to `.../checkpoints/{step:04d}/`, the
same layout as the reference's, so either can read what the other wrote. The bucket defaults to the
`BACKUP_BUCKET` environment variable, as in the reference.

    await push_model_to_s3("agent-001", "tic-tac-toe", s3_bucket="my-backups")
    await pull_model_from_s3("agent-001", "tic-tac-toe", s3_bucket="my-backups", step=12)

The copying is `aws s3 sync` (`aws s3 cp` for a single file): credentials, regions, profiles and
S3-compatible endpoints (`AWS_ENDPOINT_URL`) work as they do for the CLI. Install it with
`pip install awscli` (or AWS's own installer). `LocalBackend._experimental_push_to_s3` calls these with
the model's names; its pulls and forks go through `art.record.s3_checkpoints`, which builds on them.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import zipfile
from asyncio.subprocess import DEVNULL, PIPE
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from art.common.errors import ForbiddenBucketCreationError
from art.common.limit_concurrency import limit_concurrency
from art.record.storage import ModelStorage

ExcludableOption = Literal["checkpoints", "logs", "trajectories"]
"""Folders of a model that a sync may leave out."""

INSTALL_HINT = (
    "install the AWS CLI: pip install awscli (or https://aws.amazon.com/cli/), then configure credentials"
)


class S3SyncError(RuntimeError):
    """An `aws` command failed (its exit status and the command are in the message)."""


def _bucket(s3_bucket: str | None) -> str:
    bucket = s3_bucket or os.environ.get("BACKUP_BUCKET")
    if not bucket:
        raise ValueError("no S3 bucket: pass s3_bucket=... or set the BACKUP_BUCKET environment variable")
    return bucket


def build_s3_path(
    *,
    model_name: str,
    project: str,
    step: int | None = None,
    s3_bucket: str | None = None,
    prefix: str | None = None,
) -> str:
    """The S3 URI of a model's folder, or of one checkpoint's with `step`.

    Example:
        >>> build_s3_path(model_name="agent", project="demo", step=3, s3_bucket="b", prefix="runs/")
        's3://b/runs/demo/models/agent/checkpoints/0003'
    """
    prefix_part = f"{prefix.strip('/')}/" if prefix and prefix.strip("/") else ""
    path = f"s3://{_bucket(s3_bucket)}/{prefix_part}{project}/models/{model_name}"
    return f"{path}/checkpoints/{step:04d}" if step is not None else path


def build_s3_zipped_step_path(
    *,
    model_name: str,
    project: str,
    step: int,
    s3_bucket: str | None = None,
    prefix: str | None = None,
) -> str:
    """The S3 URI of a checkpoint's zip archive (what `archive_and_presign_step_url` uploads).

    Example:
        >>> build_s3_zipped_step_path(model_name="agent", project="demo", step=3, s3_bucket="b")
        's3://b/demo/models/agent/zipped-steps/0003.zip'
    """
    base = build_s3_path(model_name=model_name, project=project, s3_bucket=s3_bucket, prefix=prefix)
    return f"{base}/zipped-steps/{step:04d}.zip"


def _aws(profile: str | None) -> list[str]:
    if shutil.which("aws") is None:
        raise S3SyncError(f"the `aws` command was not found on PATH: {INSTALL_HINT}")
    return ["aws", *(["--profile", profile] if profile else [])]


async def _run(cmd: list[str], *, verbose: bool, capture: bool = False) -> str:
    """Run an `aws` command (S3SyncError with its message on failure); returns its output when `capture`."""
    out = PIPE if capture else None if verbose else DEVNULL
    process = await asyncio.create_subprocess_exec(*cmd, stdout=out, stderr=None if verbose else PIPE)
    stdout, err = await process.communicate()
    if process.returncode != 0:
        detail = f": {err.decode(errors='replace').strip()}" if err else ""
        raise S3SyncError(f"{' '.join(cmd)} exited with status {process.returncode}{detail}")
    return stdout.decode(errors="replace") if stdout else ""


@limit_concurrency(1)
async def s3_sync(
    source: str,
    destination: str,
    *,
    profile: str | None = None,
    verbose: bool = False,
    delete: bool = False,
    exclude: Sequence[ExcludableOption] | None = None,
) -> None:
    """Copy `source` to `destination` (local paths or `s3://` URIs) with `aws s3 sync`, or `aws s3 cp`
    when `source` is a local file. `delete` removes what the source lacks; `exclude` leaves folders out.
    One sync runs at a time. Raises S3SyncError with the CLI's message when it fails.

    Example:
        await s3_sync(".art/demo/models/agent", "s3://my-backups/demo/models/agent", exclude=["trajectories"])
    """
    cmd = [*_aws(profile), "s3", "cp" if os.path.isfile(source) else "sync"]
    if delete:
        cmd.append("--delete")
    for folder in exclude or ():
        cmd += ["--exclude", f"{folder}/*"]
    await _run([*cmd, source, destination], verbose=verbose)


async def ensure_bucket_exists(s3_bucket: str | None = None, profile: str | None = None) -> None:
    """Create the bucket if it does not exist; ForbiddenBucketCreationError if that is refused.

    Example:
        await ensure_bucket_exists("my-backups")
    """
    bucket = _bucket(s3_bucket)
    head = await asyncio.create_subprocess_exec(
        *_aws(profile), "s3api", "head-bucket", "--bucket", bucket, stdout=DEVNULL, stderr=DEVNULL
    )
    if await head.wait() == 0:
        return
    print(f"S3 bucket {bucket} does not exist, creating it")
    try:
        await _run([*_aws(profile), "s3api", "create-bucket", "--bucket", bucket], verbose=False)
    except S3SyncError as e:
        raise ForbiddenBucketCreationError(
            f"could not create the S3 bucket {bucket!r}: it may exist and belong to another account, or your "
            f"credentials may not allow creating buckets ({e})"
        ) from e


def _model_dir(model_name: str, project: str, art_path: str | None) -> Path:
    return ModelStorage(art_path or ".art", project, model_name).root


async def pull_model_from_s3(
    model_name: str,
    project: str,
    step: int | None = None,
    s3_bucket: str | None = None,
    prefix: str | None = None,
    verbose: bool = False,
    delete: bool = False,
    art_path: str | None = None,
    exclude: Sequence[ExcludableOption] | None = None,
) -> str:
    """Download a model's folder (or, with `step`, one checkpoint) from S3 into `art_path` (default
    ".art"); returns the local model folder. `delete` removes local files that S3 lacks.

    Example:
        folder = await pull_model_from_s3("agent-001", "tic-tac-toe", s3_bucket="my-backups")
    """
    model_dir = _model_dir(model_name, project, art_path)
    local = model_dir / "checkpoints" / f"{step:04d}" if step is not None else model_dir
    local.mkdir(parents=True, exist_ok=True)
    source = build_s3_path(
        model_name=model_name, project=project, step=step, s3_bucket=s3_bucket, prefix=prefix
    )
    await ensure_bucket_exists(s3_bucket)
    await s3_sync(source, str(local), verbose=verbose, delete=delete, exclude=exclude)
    return str(model_dir)


async def push_model_to_s3(
    model_name: str,
    project: str,
    s3_bucket: str | None = None,
    prefix: str | None = None,
    verbose: bool = False,
    delete: bool = False,
    art_path: str | None = None,
) -> None:
    """Upload a model's folder under `art_path` (default ".art") to S3; `delete` removes from S3 what is
    no longer local (e.g. checkpoints removed by `delete_checkpoints`).

    Example:
        await push_model_to_s3("agent-001", "tic-tac-toe", s3_bucket="my-backups")
    """
    model_dir = _model_dir(model_name, project, art_path)
    if not model_dir.is_dir():
        raise FileNotFoundError(
            f"no model folder to push: {model_dir} does not exist (check art_path and the names)"
        )
    destination = build_s3_path(model_name=model_name, project=project, s3_bucket=s3_bucket, prefix=prefix)
    await ensure_bucket_exists(s3_bucket)
    await s3_sync(str(model_dir), destination, verbose=verbose, delete=delete)


async def get_checkpoint_steps_from_s3(
    model_name: str,
    project: str,
    s3_bucket: str | None = None,
    prefix: str | None = None,
) -> list[int]:
    """Every checkpoint step stored in S3 for the model, ascending (empty when there is none, or no bucket).

    Example:
        steps = await get_checkpoint_steps_from_s3("agent-001", "tic-tac-toe", s3_bucket="my-backups")
    """
    base = build_s3_path(model_name=model_name, project=project, s3_bucket=s3_bucket, prefix=prefix)
    process = await asyncio.create_subprocess_exec(
        *_aws(None), "s3", "ls", f"{base}/checkpoints/", stdout=PIPE, stderr=DEVNULL
    )
    out, _ = await process.communicate()
    if process.returncode != 0:  # `aws s3 ls` exits 1 when nothing matches
        return []
    return sorted(
        int(parts[1].rstrip("/"))
        for parts in (line.split() for line in out.decode().splitlines())
        if len(parts) >= 2 and parts[0] == "PRE" and parts[1].rstrip("/").isdigit()
    )


async def get_latest_checkpoint_step_from_s3(
    model_name: str,
    project: str,
    s3_bucket: str | None = None,
    prefix: str | None = None,
) -> int | None:
    """The newest checkpoint step stored in S3 for the model, or None if there is none.

    Example:
        step = await get_latest_checkpoint_step_from_s3("agent-001", "tic-tac-toe", s3_bucket="my-backups")
    """
    return max(await get_checkpoint_steps_from_s3(model_name, project, s3_bucket, prefix), default=None)


async def get_checkpoint_step_not_after_from_s3(
    model_name: str,
    project: str,
    not_after_step: int,
    s3_bucket: str | None = None,
    prefix: str | None = None,
) -> int | None:
    """The newest checkpoint step in S3 that is at most `not_after_step`, or None if there is none.

    Example:
        step = await get_checkpoint_step_not_after_from_s3("agent-001", "ttt", 10, s3_bucket="my-backups")
    """
    steps = await get_checkpoint_steps_from_s3(model_name, project, s3_bucket, prefix)
    return max((s for s in steps if s <= not_after_step), default=None)


async def archive_and_presign_step_url(
    model_name: str,
    project: str,
    step: int,
    s3_bucket: str | None = None,
    prefix: str | None = None,
    verbose: bool = False,
    delete: bool = False,
    art_path: str | None = None,
    checkpoint_path: str | None = None,
) -> str:
    """Zip a checkpoint, upload it to `build_s3_zipped_step_path(...)` and return a URL that downloads it
    for an hour (`aws s3 presign`), e.g. for a provider that deploys LoRA adapters from a URL.

    The checkpoint is `checkpoint_path`, or step `step` of the model under `art_path` (default ".art");
    a missing one is a ValueError naming the folder. `delete` is the reference's and has no effect on a
    single file.

    Example:
        url = await archive_and_presign_step_url("agent-001", "demo", step=12, s3_bucket="my-backups")
    """
    del delete  # one file is copied: nothing at the destination to delete
    folder = (
        Path(checkpoint_path)
        if checkpoint_path
        else ModelStorage(art_path or ".art", project, model_name).checkpoint_dir(step)
    )
    if not folder.is_dir():
        raise ValueError(f"the checkpoint folder {folder} does not exist: train or pull step {step} first")
    destination = build_s3_zipped_step_path(
        model_name=model_name, project=project, step=step, s3_bucket=s3_bucket, prefix=prefix
    )
    with tempfile.TemporaryDirectory() as scratch:
        archive = Path(scratch) / f"{step:04d}.zip"
        with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zipped:
            for path in sorted(p for p in folder.rglob("*") if p.is_file()):
                zipped.write(path, path.relative_to(folder).as_posix())
        await ensure_bucket_exists(s3_bucket)
        await s3_sync(str(archive), destination, verbose=verbose)
    url = (
        await _run(
            [*_aws(None), "s3", "presign", destination, "--expires-in", "3600"], verbose=False, capture=True
        )
    ).strip()
    if verbose:
        print("presigned_url", url)
    return url
