"""The training jobs of one model served by `art serve`: accepted at once, run one at a time, in order.

A job is one `ModelService.train` call asked over HTTP. It is written down before it is acknowledged
(`jobs/{id}.json`, rewritten atomically at each change of status) and everything that happens to it is
appended to `jobs/{id}.events.jsonl`: `queued`, `started`, `progress` (per micro-batch, with its loss),
`checkpoint_saved`, `adapter_loaded`, then `completed` (with the `TrainResult`) or `failed` (with the
reason). Events carry a cursor (1, 2, ... per job), so a client that lost its connection asks for what came
after the last one it saw; `wait_for_event` lets it wait for the next one (long polling, server-sent events).

Jobs of a model run in the order they were accepted, never two at once (the service's lock would serialise
them anyway; the queue also keeps their order). A submission that repeats an idempotency key returns the
job that key made instead of a second step, unless that job failed (nothing of it was applied, so the
retry runs). The lifecycle of the step itself is the service's; this module only calls it.

After a restart (`recover`), a job the old process had accepted but not finished is settled from what is
on disk: if the newest complete checkpoint is the one it was training, it completed (its metrics are lost);
otherwise it failed, nothing of it was applied, and the reason says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from art.backends.remote_protocol import TERMINAL_EVENTS, TrainingJob, TrainingJobEvent
from art.record.storage import ModelStorage, atomic_write_text, disk_said, storage_error, validate_name
from art.trajectories import TrajectoryGroup
from art.types import TrainResult, TrainSpec

if TYPE_CHECKING:
    from art.service.service import ModelService

logger = logging.getLogger(__name__)

_JOB_ID_ALPHABET = set("0123456789abcdef")


def result_json(result: TrainResult) -> dict[str, Any]:
    """A step's result as JSON data, non-finite metrics as "NaN"/"Infinity" strings (a float field reads them
    back), so a job whose loss was NaN survives its record, its events and the wire."""
    data: dict[str, Any] = json.loads(result.model_dump_json())
    return data


def new_job_id() -> str:
    """A fresh job id: "job-" and 24 hex digits."""
    return f"job-{secrets.token_hex(12)}"


def is_job_id(value: str) -> bool:
    """Whether `value` has the shape of a job id (checked before anything touches the disk)."""
    return len(value) == 28 and value.startswith("job-") and set(value[4:]) <= _JOB_ID_ALPHABET


JOBS_FOLDER = "jobs"
"""The folder of a model's record that holds its training jobs (`ModelStorage.owned_folder`)."""


def jobs_dir(storage: ModelStorage) -> Path:
    """Where the model's jobs are kept: `{record}/jobs/`."""
    return storage.owned_folder(JOBS_FOLDER)


def job_path(storage: ModelStorage, job_id: str) -> Path:
    """A job's record (rewritten atomically at each change of status)."""
    return jobs_dir(storage) / f"{validate_name(job_id, 'job id')}.json"


def job_events_path(storage: ModelStorage, job_id: str) -> Path:
    """A job's events, one JSON line each, appended."""
    return jobs_dir(storage) / f"{validate_name(job_id, 'job id')}.events.jsonl"


def job_ids(storage: ModelStorage) -> list[str]:
    """The id of every job with a record (in no particular order: records hold their creation time)."""
    folder = jobs_dir(storage)
    if not folder.exists():
        return []
    return sorted(
        p.name[: -len(".json")]
        for p in folder.iterdir()
        if p.name.endswith(".json") and not p.name.startswith(".")
    )


@dataclass
class _Job:
    record: TrainingJob
    events: list[TrainingJobEvent] | None  # None: on disk only (a finished job of an earlier process)
    groups: list[TrajectoryGroup] = field(default_factory=list)  # kept only until the job runs
    spec: TrainSpec | None = None
    changed: asyncio.Event = field(default_factory=asyncio.Event)


class ModelJobs:
    """The job queue of one served model (see the module docstring).

    Example (what `art.hub.api` does):
        jobs = ModelJobs(storage, service); jobs.recover(); jobs.start()
        job, created = jobs.submit(groups, spec, key="...", request_sha256="...")
        events, has_more = jobs.events_after(job.id, after=0)
    """

    def __init__(self, storage: ModelStorage, service: ModelService, *, progress: bool = True) -> None:
        self.storage = storage
        self.service = service
        self.progress = progress
        self.model = f"{storage.project}/{storage.name}"
        self._jobs: dict[str, _Job] = {}
        self._by_key: dict[str, str] = {}
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._worker: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # ---- lifecycle -------------------------------------------------------------------------------
    def recover(self) -> list[TrainingJob]:
        """Load the jobs on disk and settle those an earlier process left unfinished; returns those."""
        settled: list[TrainingJob] = []
        records: list[TrainingJob] = []
        for job_id in job_ids(self.storage):
            try:
                records.append(
                    TrainingJob.model_validate_json(
                        job_path(self.storage, job_id).read_text(encoding="utf-8")
                    )
                )
            except (OSError, ValueError, ValidationError) as e:
                logger.warning("skipping unreadable job record %s: %s", job_id, e)
        for record in sorted(records, key=lambda r: r.created_at):
            job = _Job(record=record, events=None)
            self._jobs[record.id] = job
            if record.idempotency_key is not None and record.status != "failed":
                self._by_key[record.idempotency_key] = record.id
            if record.status in ("queued", "running"):
                self._settle_interrupted(job)
                settled.append(job.record)
        return settled

    def _settle_interrupted(self, job: _Job) -> None:
        step = self.service.step
        record = job.record
        job.events = self._read_events(record.id, repair=True)
        if record.status == "running" and record.start_step is not None and step == record.start_step + 1:
            result = TrainResult(
                step=step,
                message=(
                    f"The server stopped after saving step {step}, this job's checkpoint, but before it "
                    "reported the step: the step was applied; its metrics were lost."
                ),
            )
            self._finish(job, "completed", result=result)
        else:
            what = "while it ran" if record.status == "running" else "before it started"
            reason = (
                f"the server stopped (killed or crashed) {what}; nothing of this job was applied: the model "
                f"resumes from step {step}, its newest complete checkpoint. Submit the groups again to "
                "train on them."
            )
            self._finish(job, "failed", error=reason)

    def start(self) -> None:
        """Start running queued jobs (on the running event loop)."""
        self._loop = asyncio.get_running_loop()
        if self._worker is None:
            self._worker = asyncio.ensure_future(self._work())

    async def close(self, *, timeout: float | None = None) -> None:
        """Fail the jobs still queued, let the running one finish (up to `timeout` s), stop the worker.

        A job still running then stays "running" on disk: the next start settles it (`recover`)."""
        for job in self._jobs.values():
            if job.record.status == "queued":
                self._finish(
                    job, "failed", error="the server shut down before this job started; nothing was applied"
                )
        running = next((j for j in self._jobs.values() if j.record.status == "running"), None)
        if running is not None and self._worker is not None:
            logger.warning("waiting for the running training job %s to finish...", running.record.id)

            async def finished(job: _Job) -> None:
                while job.record.status == "running":
                    await job.changed.wait()

            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(finished(running), timeout)
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
            self._worker = None

    # ---- submit ----------------------------------------------------------------------------------
    def submit(
        self,
        groups: Sequence[TrajectoryGroup],
        spec: TrainSpec,
        *,
        key: str | None,
        request_sha256: str,
        base_step: int | None = None,
        notes: Sequence[str] = (),
    ) -> tuple[TrainingJob, bool]:
        """Queue a step on `groups`; returns (the job, True) or, for a known key, (its job, False).

        Raises `IdempotencyConflict` when `key` was used with a different request, and OSError when the
        job's record cannot be written (then nothing was queued)."""
        if key is not None and key in self._by_key:
            existing = self._jobs[self._by_key[key]]
            if existing.record.request_sha256 != request_sha256:
                raise IdempotencyConflict(
                    f"the idempotency key {key!r} was used for job {existing.record.id} with a different "
                    "request; use a new key for a new request"
                )
            if existing.record.status != "failed":
                return existing.record, False
        record = TrainingJob(
            id=new_job_id(),
            model=self.model,
            status="queued",
            created_at=time.time(),
            base_step=base_step,
            num_groups=len(groups),
            num_trajectories=sum(len(g.trajectories) for g in groups),
            idempotency_key=key,
            request_sha256=request_sha256,
        )
        job = _Job(record=record, events=[], groups=list(groups), spec=spec)
        self._write_record(record)  # on disk before it exists here: a full disk leaves no half-made job
        self._jobs[record.id] = job
        if key is not None:
            self._by_key[key] = record.id
        ahead = sum(1 for j in self._jobs.values() if j.record.status in ("queued", "running")) - 1
        data: dict[str, Any] = {"jobs_ahead": ahead}
        if notes:
            data["warnings"] = list(notes)
        self._add_event(job, "queued", data)
        self._queue.put_nowait(record.id)
        return record, True

    # ---- read ------------------------------------------------------------------------------------
    def get(self, job_id: str) -> TrainingJob | None:
        """The job's record, or None if this model has no such job."""
        job = self._jobs.get(job_id)
        return None if job is None else job.record

    def recent(self, limit: int = 20) -> list[TrainingJob]:
        """The newest `limit` jobs, newest first."""
        records = sorted((j.record for j in self._jobs.values()), key=lambda r: r.created_at, reverse=True)
        return records[:limit]

    def events_after(
        self, job_id: str, after: int = 0, limit: int = 100
    ) -> tuple[list[TrainingJobEvent], bool]:
        """The job's events with id > `after` (at most `limit`), and whether more follow."""
        job = self._jobs[job_id]
        if job.events is None:
            self._load_events(job)
        assert job.events is not None
        newer = [e for e in job.events if e.id > after]
        return newer[:limit], len(newer) > limit

    async def wait_for_event(self, job_id: str, after: int, timeout: float) -> bool:
        """Wait until the job has an event with id > `after` (True) or `timeout` s pass (False)."""
        job = self._jobs[job_id]
        deadline = time.monotonic() + timeout
        while True:
            changed = job.changed  # taken before the check, so an event added after it wakes us
            events, _ = self.events_after(job_id, after, limit=1)
            if events:
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            try:
                await asyncio.wait_for(changed.wait(), remaining)
            except TimeoutError:
                return False

    # ---- run -------------------------------------------------------------------------------------
    async def _work(self) -> None:
        while True:
            job_id = await self._queue.get()
            job = self._jobs[job_id]
            if job.record.status != "queued":  # failed at shutdown while it waited
                continue
            try:
                await self._run(job)
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug: the job says so, and the queue goes on with the next one
                logger.exception("training job %s of %s could not be run", job_id, self.model)
                if job.record.status in ("queued", "running"):
                    self._finish(job, "failed", error="internal error running the job (see the server's log)")

    async def _run(self, job: _Job) -> None:
        groups, spec = job.groups, job.spec or TrainSpec()
        job.groups, job.spec = [], None
        job.record = job.record.model_copy(
            update={"status": "running", "started_at": time.time(), "start_step": self.service.step}
        )
        # The one record that must reach the disk before anything else happens: after a crash of the
        # machine, a job that may have saved a checkpoint must not look unknown (a retry would train twice).
        # Every other write is atomic but not fsynced (a killed process loses none of them).
        try:
            await asyncio.to_thread(self._write_record, job.record, durable=True)
        except OSError as e:  # nothing trained yet: the job fails, saying what the disk said
            disk = storage_error(e)
            said = disk_said(disk) if disk is not None else str(e)
            self._finish(
                job,
                "failed",
                error=f"the server's disk refused the job's record ({said}); nothing was trained",
            )
            return
        self._add_event(
            job,
            "started",
            {"step": self.service.step, "num_groups": job.record.num_groups,
             "num_trajectories": job.record.num_trajectories},
        )  # fmt: skip
        loop = asyncio.get_running_loop()
        loop_thread = threading.get_ident()

        def on_event(kind: str, data: dict[str, Any]) -> None:
            # The service calls this on the engine's thread (progress) or on the loop (the rest).
            if threading.get_ident() == loop_thread:
                self._add_event(job, kind, data)
            else:
                loop.call_soon_threadsafe(self._add_event, job, kind, data)

        try:
            result = await self.service.train(groups, spec, progress=self.progress, on_event=on_event)
        except asyncio.CancelledError:
            # The server is going away while the step may still finish on the engine's thread: the record
            # stays "running", and the next start settles it from the checkpoints on disk (`recover`).
            raise
        except Exception as e:
            logger.exception("training job %s of %s failed", job.record.id, self.model)
            self._finish(job, "failed", error=f"{type(e).__name__}: {e}")
        else:
            self._finish(job, "completed", result=result)

    # ---- records and events ----------------------------------------------------------------------
    def _finish(
        self, job: _Job, status: str, *, result: TrainResult | None = None, error: str | None = None
    ) -> None:
        job.record = job.record.model_copy(
            update={"status": status, "finished_at": time.time(), "result": result, "error": error}
        )
        key = job.record.idempotency_key
        if status == "failed" and key is not None and self._by_key.get(key) == job.record.id:
            del self._by_key[key]  # a failed job applied nothing: a retry with its key may run again
        if status == "completed" and result is not None:
            self._add_event(job, "completed", {"result": result_json(result)})
        else:
            self._add_event(job, "failed", {"reason": error or "unknown"})
        try:
            self._write_record(job.record)
        except OSError as e:  # known here; after a restart `recover` settles it from the checkpoints
            logger.error("could not write the record of training job %s (%s): %s", job.record.id, status, e)

    def _write_record(self, record: TrainingJob, *, durable: bool = False) -> None:
        atomic_write_text(
            job_path(self.storage, record.id), record.model_dump_json(indent=1) + "\n", durable=durable
        )

    def _load_events(self, job: _Job) -> None:
        """A finished job's events from disk, ending with its outcome even if a crash of the machine lost
        that line (the record is what counts; events are not fsynced)."""
        job.events = self._read_events(job.record.id, repair=True)
        record = job.record
        if record.status in TERMINAL_EVENTS and not (job.events and job.events[-1].type in TERMINAL_EVENTS):
            if record.status == "completed" and record.result is not None:
                self._add_event(job, "completed", {"result": result_json(record.result)})
            else:
                self._add_event(job, "failed", {"reason": record.error or "unknown"})

    def _add_event(self, job: _Job, kind: str, data: dict[str, Any]) -> None:
        if job.events is None:
            job.events = self._read_events(job.record.id, repair=True)
        event = TrainingJobEvent.model_validate(
            {"id": len(job.events) + 1 if not job.events else job.events[-1].id + 1, "type": kind,
             "created_at": time.time(), "data": data}
        )  # fmt: skip
        job.events.append(event)
        path = job_events_path(self.storage, job.record.id)
        try:  # events are informative (the record is what counts): a full disk loses the line, not the job
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a", encoding="utf-8") as f:
                f.write(event.model_dump_json() + "\n")
        except OSError as e:
            logger.warning("could not write event %d of training job %s: %s", event.id, job.record.id, e)
        job.changed.set()
        job.changed = asyncio.Event()

    def _read_events(self, job_id: str, *, repair: bool = False) -> list[TrainingJobEvent]:
        """A job's events from disk; a torn last line (a crash mid-write) is skipped, and with `repair`
        cut off, so the next event starts on a line of its own."""
        path = job_events_path(self.storage, job_id)
        if not path.exists():
            return []
        raw = path.read_bytes()
        events: list[TrainingJobEvent] = []
        lines = raw.split(b"\n")  # the last item is what follows the last newline (b"" normally)
        keep, torn = 0, False  # keep: bytes of the whole, readable lines before a torn one
        for i, line in enumerate(lines):
            if line.strip():
                try:
                    events.append(TrainingJobEvent.model_validate_json(line))
                except ValidationError:
                    logger.warning("%s: skipping a torn or unreadable event line", path)
                    torn = True
                    break
            if i < len(lines) - 1:
                keep += len(line) + 1
        if repair and (torn or lines[-1].strip()):
            with open(path, "r+b") as f:
                f.truncate(keep)
                if not torn:  # the last event is whole but lost its newline: give it back
                    f.seek(keep)
                    f.write(lines[-1] + b"\n")
        return events


class IdempotencyConflict(ValueError):
    """An idempotency key reused with a different request."""
