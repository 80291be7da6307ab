"""A model's checkpoints moved between its record, S3 and another model's record: what the `_experimental_*`
methods of `LocalBackend` do, on plain names and paths (no backend, no model object).

- `pull_model_checkpoint`  one checkpoint, found on disk or in S3, put in place whole or not at all
- `pull_model_backup`      a model's backed-up folder (or one step of it) from S3, before it is served
- `fork_model_checkpoint`  another model's checkpoint (on disk or pulled from S3) copied in as this one's

The copying itself (the AWS CLI, the S3 layout, the bucket) is `art.record.s3`'s; the checkpoint folders
(manifest, checks, set-aside copies) are `art.record.storage`'s. A backend passes `guard`: called with what is
about to be done just before anything is written into the model's own folder, it raises to refuse (a
`LocalBackend` refuses while it serves the model, whose checkpoints would change under the running service).

    folder = await pull_model_checkpoint("agent-001", "tic-tac-toe", art_path=".art", s3_bucket="my-backups")
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

from art.record import s3
from art.record.s3 import ExcludableOption
from art.record.storage import CHECKPOINT_MANIFEST, ModelStorage, checkpoint_folder_step

Guard = Callable[[str], None]
"""Called with what is about to be done (e.g. "pull from S3") before the model's own folder is written;
raises to refuse."""


def _copy_into(source: Path, final: Path) -> None:
    """Copy a checkpoint folder to `final` (missing or empty) through a temporary sibling, so an
    interrupted copy never looks like a checkpoint."""
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".tmp-{final.name}-", dir=final.parent))
    try:
        copy = staging / "checkpoint"
        shutil.copytree(source, copy)
        if final.exists():  # empty (checked by the caller)
            final.rmdir()
        os.replace(copy, final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _no_guard(doing: str) -> None:
    del doing


async def pull_model_checkpoint(
    model_name: str,
    project: str,
    *,
    art_path: str,
    step: int | Literal["latest"] | None = None,
    local_path: str | None = None,
    s3_bucket: str | None = None,
    prefix: str | None = None,
    verbose: bool = False,
    guard: Guard = _no_guard,
) -> str:
    """Find a checkpoint of the model under `art_path` on disk or in S3 and return the local folder it is in
    (`LocalBackend._experimental_pull_model_checkpoint`, whose docstring says the rules).

    `step` None or "latest": the newest on disk and, with `s3_bucket`, in S3 (a tie is the local one). One
    only in S3 is downloaded, checked against its manifest and put in place whole or not at all; without
    `local_path` it lands in the model's own folder (after `guard("pull a checkpoint into its folder")`).

    Example:
        folder = await pull_model_checkpoint("agent-001", "ttt", art_path=".art", s3_bucket="my-backups")
    """
    storage = ModelStorage(art_path, project, model_name)
    who = f"{project}/{model_name}"
    local_steps = storage.checkpoint_steps()
    s3_uri = ""
    if s3_bucket is not None:
        s3_uri = s3.build_s3_path(model_name=model_name, project=project, s3_bucket=s3_bucket, prefix=prefix)
        s3_uri += "/checkpoints/"

    async def steps_in_s3() -> list[int]:  # asked only when needed: it runs the AWS CLI
        if s3_bucket is None:
            return []
        return await s3.get_checkpoint_steps_from_s3(model_name, project, s3_bucket, prefix)

    s3_steps: list[int] | None = None
    if step is None or step == "latest":
        s3_steps = await steps_in_s3()
        if not local_steps and not s3_steps:
            raise ValueError(
                f"no checkpoint of {who} in {storage.checkpoints_dir}"
                + (f" nor in {s3_uri}" if s3_uri else " (pass s3_bucket=... to look in S3 too)")
                + "; train the model first, or check its name, project and base_path"
            )
        resolved = max(local_steps[-1:] + s3_steps[-1:])  # a tie is the local one: it is used first
        if verbose:
            source = "local storage" if resolved in local_steps else "S3"
            print(f"Using the latest checkpoint of {who}, step {resolved}, from {source}")
    elif isinstance(step, int) and not isinstance(step, bool) and step >= 0:
        resolved = step
    else:
        raise ValueError(f"step must be a checkpoint number (an int >= 0), 'latest' or None, not {step!r}")

    final = Path(local_path) if local_path is not None else storage.checkpoint_dir(resolved)
    if local_path is not None and final.exists():
        if checkpoint_folder_step(final) == resolved:
            if verbose:
                print(f"Checkpoint {resolved} of {who} is already at {final}")
            return str(final)
        if not final.is_dir() or any(final.iterdir()):
            raise FileExistsError(
                f"local_path {final} is not empty; give a new or empty folder for checkpoint {resolved}"
            )

    if resolved in local_steps:
        found = storage.checkpoint_dir(resolved)
        if local_path is not None:
            if verbose:
                print(f"Copying checkpoint {resolved} of {who} from {found} to {final}")
            await asyncio.to_thread(_copy_into, found, final)
        elif verbose:
            print(f"Checkpoint {resolved} of {who} is at {found}")
        return str(final)
    if s3_bucket is None:
        raise FileNotFoundError(
            f"checkpoint {resolved} of {who} is not in {storage.checkpoints_dir} (steps there: "
            f"{local_steps or 'none'}); pass s3_bucket=... to pull it from S3"
        )
    if s3_steps is None:
        s3_steps = await steps_in_s3()
    if resolved not in s3_steps:
        raise FileNotFoundError(
            f"checkpoint {resolved} of {who} is neither in {storage.checkpoints_dir} (steps there: "
            f"{local_steps or 'none'}) nor in {s3_uri} (steps there: {s3_steps or 'none'})"
        )
    if local_path is None:
        guard("pull a checkpoint into its folder")
    if verbose:
        print(f"Pulling checkpoint {resolved} of {who} from {s3_uri}")
    await _pull_from_s3(
        storage, resolved, final, into_own_folder=local_path is None, s3_bucket=s3_bucket, prefix=prefix,
        s3_uri=s3_uri, verbose=verbose,
    )  # fmt: skip
    if verbose:
        print(f"Checkpoint {resolved} of {who} is at {final}")
    return str(final)


async def _pull_from_s3(
    storage: ModelStorage,
    resolved: int,
    final: Path,
    *,
    into_own_folder: bool,
    s3_bucket: str,
    prefix: str | None,
    s3_uri: str,
    verbose: bool,
) -> None:
    """Download checkpoint `resolved` of `storage`'s model from S3 into a staging folder beside `final`,
    check it against its manifest, and move it to `final` whole (nothing is kept if any of it fails). An
    incomplete local copy in the model's own folder (`into_own_folder`) is set aside as rejected."""
    project, model_name = storage.project, storage.name
    who = f"{project}/{model_name}"
    staging_parent = storage.checkpoints_dir if into_own_folder else final.parent
    staging_parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".tmp-{resolved:04d}-", dir=staging_parent))
    try:
        await s3.pull_model_from_s3(
            model_name, project, step=resolved, s3_bucket=s3_bucket, prefix=prefix,
            verbose=verbose, art_path=str(staging),
        )  # fmt: skip
        pulled = ModelStorage(staging, project, model_name)
        pulled.clean_incomplete_checkpoints()  # a bare PEFT adapter (the reference's) is adopted
        if not (pulled.checkpoint_dir(resolved) / CHECKPOINT_MANIFEST).is_file():
            raise FileNotFoundError(
                f"checkpoint {resolved} of {who} in {s3_uri} has no {CHECKPOINT_MANIFEST} and is not a "
                "whole PEFT adapter: it is incomplete (an interrupted push?); nothing was kept"
            )
        pulled.verify_checkpoint(resolved)  # every file as it was saved
        if final.exists() and into_own_folder and any(final.iterdir()):
            storage.reject_checkpoint(resolved, "replaced by the complete checkpoint pulled from S3")
        elif final.exists():  # an empty local_path
            shutil.rmtree(final)
        final.parent.mkdir(parents=True, exist_ok=True)
        os.replace(pulled.checkpoint_dir(resolved), final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


async def pull_model_backup(
    model_name: str,
    project: str,
    *,
    art_path: str,
    s3_bucket: str | None = None,
    prefix: str | None = None,
    verbose: bool = False,
    delete: bool = False,
    only_step: int | Literal["latest"] | None = None,
    step: int | None = None,
    exclude: Sequence[ExcludableOption] | None = None,
    latest_only: bool = False,
    guard: Guard = _no_guard,
) -> None:
    """Download the model's backed-up folder from S3 into `art_path` (`LocalBackend._experimental_pull_from_s3`,
    after `guard("pull from S3")`). `only_step` pulls one checkpoint (a step, or "latest": the newest in S3,
    nothing when S3 has none); `step` and `latest_only` are its older spellings; `exclude` leaves folders
    out; `delete` removes local files that S3 lacks.

    Example:
        await pull_model_backup("agent-001", "ttt", art_path=".art", s3_bucket="my-backups", only_step="latest")
    """
    guard("pull from S3")
    if only_step is None and latest_only:
        only_step = "latest"
    if only_step == "latest" and step is None:
        step = await s3.get_latest_checkpoint_step_from_s3(
            model_name, project, s3_bucket=s3_bucket, prefix=prefix
        )
        if step is None:
            if verbose:
                print("No checkpoints found in S3")
            return
        if verbose:
            print(f"Found latest checkpoint at step {step}")
    elif isinstance(only_step, int) and step is None:
        step = only_step
    await s3.pull_model_from_s3(
        model_name,
        project,
        step=step,
        s3_bucket=s3_bucket,
        prefix=prefix,
        verbose=verbose,
        delete=delete,
        art_path=art_path,
        exclude=exclude,
    )


async def fork_model_checkpoint(
    model_name: str,
    project: str,
    *,
    art_path: str,
    base_model: str | None,
    from_model: str,
    from_project: str | None = None,
    from_s3_bucket: str | None = None,
    not_after_step: int | None = None,
    verbose: bool = False,
    prefix: str | None = None,
    guard: Guard = _no_guard,
) -> None:
    """Copy another model's newest checkpoint (or its newest at most `not_after_step`) into this model's
    record under `art_path`, under the same step number (`LocalBackend._experimental_fork_checkpoint`,
    after `guard("fork a checkpoint into it")`). With `from_s3_bucket` it is pulled from S3 first.

    ValueError, with the reason, when the source has no such checkpoint, was trained on another base model
    than `base_model`, or this model already has a checkpoint at that step or later.

    Example:
        await fork_model_checkpoint("agent-002", "ttt", art_path=".art", base_model=None, from_model="agent-001")
    """
    guard("fork a checkpoint into it")
    from_project = from_project or project
    source = ModelStorage(art_path, from_project, from_model)
    if from_s3_bucket is not None:
        if not_after_step is None:
            pulled = await s3.get_latest_checkpoint_step_from_s3(
                from_model, from_project, from_s3_bucket, prefix
            )
        else:
            pulled = await s3.get_checkpoint_step_not_after_from_s3(
                from_model, from_project, not_after_step, from_s3_bucket, prefix
            )
        if pulled is None:
            after = f" at or before step {not_after_step}" if not_after_step is not None else ""
            raise ValueError(f"no checkpoint of {from_project}/{from_model}{after} in s3://{from_s3_bucket}")
        if verbose:
            print(f"Pulling checkpoint {pulled} of {from_project}/{from_model} from S3")
        await s3.pull_model_from_s3(
            from_model, from_project, step=pulled, s3_bucket=from_s3_bucket, prefix=prefix,
            verbose=verbose, art_path=art_path,
        )  # fmt: skip
    steps = source.checkpoint_steps()
    eligible = [s for s in steps if not_after_step is None or s <= not_after_step]
    if not eligible:
        raise ValueError(
            f"no checkpoint of {from_project}/{from_model} under {art_path}"
            + (f" at or before step {not_after_step}" if not_after_step is not None else "")
            + (f"; it has {steps}" if steps else "; check the names, art path, or pass from_s3_bucket")
        )
    step = eligible[-1]
    base = source.read_checkpoint_manifest(step).get("base_model") or (source.read_model_json() or {}).get(
        "base_model"
    )
    if base and base_model and base != base_model:
        raise ValueError(
            f"checkpoint {step} of {from_project}/{from_model} was trained on base model {base!r}, and "
            f"{project}/{model_name} uses {base_model!r}: an adapter only fits its own base model"
        )
    final = ModelStorage(art_path, project, model_name).fork_checkpoint(source, step)
    if verbose:
        print(f"Forked checkpoint {step} of {from_project}/{from_model} into {final}")
