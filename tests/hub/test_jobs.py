"""Training jobs of `art serve` (art.hub.jobs) against a scripted service: order, idempotency, events,
durability, and how a restart settles what the previous process left."""

from __future__ import annotations

import asyncio
import itertools
import threading
from pathlib import Path
from typing import Any

import pytest
from helpers_wait import DEADLINE_S, until

from art.hub import jobs as job_files
from art.hub.jobs import IdempotencyConflict, ModelJobs, is_job_id, new_job_id
from art.record.storage import ModelStorage
from art.trajectories import Trajectory, TrajectoryGroup
from art.types import TrainResult, TrainSpec


class ScriptedService:
    """What ModelJobs needs of a ModelService: `step` and `train(..., on_event=...)`.

    Each step reports two micro-batches (the first from another thread, as the engine's thread does),
    then a checkpoint and an adapter; `gate` holds a step until set; `fail` makes the next one raise."""

    def __init__(self) -> None:
        self.step = 0
        self.running = 0
        self.overlapped = False
        self.gate: asyncio.Event | None = None
        self.fail = False
        self.trained_on: list[str] = []

    async def train(self, groups: Any, spec: TrainSpec, *, progress: bool, on_event: Any) -> TrainResult:
        self.running += 1
        self.overlapped |= self.running > 1
        try:
            self.trained_on.append(groups[0].metadata["name"])
            await asyncio.to_thread(on_event, "progress", {"micro_batch": 1, "total": 2, "loss": 0.5})
            on_event("progress", {"micro_batch": 2, "total": 2, "loss": 0.25})
            if self.gate is not None:
                await self.gate.wait()
            if self.fail:
                self.fail = False
                raise RuntimeError("the canary failed")
            self.step += 1
            on_event("checkpoint_saved", {"step": self.step})
            on_event("adapter_loaded", {"name": f"m@{self.step}", "step": self.step})
            return TrainResult(step=self.step, metrics={"loss": 0.75})
        finally:
            self.running -= 1


def groups(name: str) -> list[TrajectoryGroup]:
    trajectory = Trajectory(messages_and_choices=[{"role": "user", "content": "hi"}], reward=1.0)
    return [TrajectoryGroup([trajectory], metadata={"name": name})]


@pytest.fixture
def storage(tmp_path: Path) -> ModelStorage:
    return ModelStorage(tmp_path, "p", "m")


async def at_the_gate(jobs: ModelJobs, job_id: str) -> None:
    """Wait (with a deadline) until the job has started and reported its two micro-batches: its step is
    then held at ScriptedService's gate, and nothing more happens until the gate is set."""
    await until(
        lambda: [e.type for e in jobs.events_after(job_id, 0, 1000)[0]][-2:] == ["progress", "progress"],
        f"job {job_id} to reach the gate",
    )


async def finished(jobs: ModelJobs, job_id: str, timeout: float = DEADLINE_S) -> Any:
    cursor = 0
    while True:
        assert await jobs.wait_for_event(job_id, cursor, timeout), "no event within the timeout"
        events, _ = jobs.events_after(job_id, cursor, limit=1000)
        cursor = events[-1].id
        job = jobs.get(job_id)
        assert job is not None
        if job.status in ("completed", "failed"):
            return job


async def test_jobs_run_one_at_a_time_in_the_order_they_were_accepted(storage: ModelStorage) -> None:
    service = ScriptedService()
    service.gate = asyncio.Event()
    jobs = ModelJobs(storage, service, progress=False)  # type: ignore[arg-type]
    jobs.start()
    submitted = [
        jobs.submit(groups(name), TrainSpec(), key=None, request_sha256=name)[0] for name in ("a", "b", "c")
    ]
    first_events = [jobs.events_after(job.id)[0][0] for job in submitted]
    assert [e.type for e in first_events] == ["queued"] * 3
    assert [e.data["jobs_ahead"] for e in first_events] == [0, 1, 2]
    await at_the_gate(jobs, submitted[0].id)
    assert [jobs.get(j.id).status for j in submitted] == ["running", "queued", "queued"]  # type: ignore[union-attr]
    service.gate.set()
    results = [await finished(jobs, job.id) for job in submitted]
    assert [r.result.step for r in results] == [1, 2, 3]
    assert service.trained_on == ["a", "b", "c"] and not service.overlapped
    for earlier, later in itertools.pairwise(results):
        assert later.started_at >= earlier.finished_at  # never interleaved
    events, has_more = jobs.events_after(submitted[1].id)
    assert not has_more
    assert [e.type for e in events] == [
        "queued", "started", "progress", "progress", "checkpoint_saved", "adapter_loaded", "completed",
    ]  # fmt: skip
    assert [e.id for e in events] == list(range(1, 8))
    assert events[1].data["step"] == 1 and events[2].data == {"micro_batch": 1, "total": 2, "loss": 0.5}
    assert events[-1].data["result"]["step"] == 2
    assert [e.type for e in jobs.events_after(submitted[1].id, after=5)[0]] == ["adapter_loaded", "completed"]
    page, more = jobs.events_after(submitted[1].id, after=0, limit=3)
    assert len(page) == 3 and more
    await jobs.close()


async def test_a_repeated_key_returns_the_same_job_and_a_failed_one_may_run_again(
    storage: ModelStorage,
) -> None:
    service = ScriptedService()
    jobs = ModelJobs(storage, service, progress=False)  # type: ignore[arg-type]
    jobs.start()
    job, created = jobs.submit(groups("a"), TrainSpec(), key="k1", request_sha256="sha-a")
    again, created_again = jobs.submit(groups("a"), TrainSpec(), key="k1", request_sha256="sha-a")
    assert created and not created_again and again.id == job.id
    with pytest.raises(IdempotencyConflict, match="different request"):
        jobs.submit(groups("b"), TrainSpec(), key="k1", request_sha256="sha-b")
    assert (await finished(jobs, job.id)).status == "completed"
    after, created_after = jobs.submit(groups("a"), TrainSpec(), key="k1", request_sha256="sha-a")
    assert not created_after and after.id == job.id and after.result is not None and after.result.step == 1
    assert service.step == 1  # one step, however often it was asked

    service.fail = True
    failed, _ = jobs.submit(groups("c"), TrainSpec(), key="k2", request_sha256="sha-c")
    record = await finished(jobs, failed.id)
    assert record.status == "failed" and "RuntimeError: the canary failed" in (record.error or "")
    retry, created_retry = jobs.submit(groups("c"), TrainSpec(), key="k2", request_sha256="sha-c")
    assert created_retry and retry.id != failed.id  # nothing of the failed job was applied
    assert (await finished(jobs, retry.id)).result.step == 2
    await jobs.close()


async def test_records_and_events_survive_a_new_process(storage: ModelStorage) -> None:
    service = ScriptedService()
    jobs = ModelJobs(storage, service, progress=False)  # type: ignore[arg-type]
    jobs.start()
    job, _ = jobs.submit(groups("a"), TrainSpec(), key="k", request_sha256="sha")
    await finished(jobs, job.id)
    await jobs.close()

    later = ModelJobs(storage, service, progress=False)  # type: ignore[arg-type]
    assert later.recover() == []  # nothing left unfinished
    record = later.get(job.id)
    assert record is not None and record.status == "completed" and record.result.step == 1  # type: ignore[union-attr]
    assert [e.type for e in later.events_after(job.id)[0]][-1] == "completed"
    again, created = later.submit(groups("a"), TrainSpec(), key="k", request_sha256="sha")
    assert not created and again.id == job.id


def write_unfinished(storage: ModelStorage, status: str, start_step: int | None) -> str:
    """The records a process killed with -9 leaves: a job `status`, its events up to `started`, and a torn
    last line."""
    from art.backends.remote_protocol import TrainingJob

    job_id = new_job_id()
    record = TrainingJob(
        id=job_id, model="p/m", status=status, created_at=1.0, start_step=start_step, request_sha256="x",
        idempotency_key="key-" + job_id,
    )  # fmt: skip
    job_files.jobs_dir(storage).mkdir(parents=True, exist_ok=True)
    job_files.job_path(storage, job_id).write_text(record.model_dump_json())
    lines = ['{"id": 1, "type": "queued", "created_at": 1.0, "data": {}}']
    if status == "running":
        lines.append('{"id": 2, "type": "started", "created_at": 2.0, "data": {"step": 0}}')
    job_files.job_events_path(storage, job_id).write_text("\n".join(lines) + '\n{"id": 9, "type": "progr')
    return job_id


@pytest.mark.parametrize(
    ("status", "checkpoint_was_saved", "outcome"),
    [("running", False, "failed"), ("running", True, "completed"), ("queued", False, "failed")],
)
async def test_a_restart_settles_the_jobs_the_killed_process_left(
    storage: ModelStorage, status: str, checkpoint_was_saved: bool, outcome: str
) -> None:
    job_id = write_unfinished(storage, status, 0 if status == "running" else None)
    service = ScriptedService()
    service.step = 1 if checkpoint_was_saved else 0  # the newest complete checkpoint the service resumed from
    jobs = ModelJobs(storage, service, progress=False)  # type: ignore[arg-type]
    settled = jobs.recover()
    assert [j.id for j in settled] == [job_id]
    record = jobs.get(job_id)
    assert record is not None and record.status == outcome
    events, _ = jobs.events_after(job_id)
    assert [e.id for e in events] == list(range(1, len(events) + 1))  # the torn line is gone, ids continue
    assert events[-1].type == outcome
    if outcome == "failed":
        reason = events[-1].data["reason"]
        what = "while it ran" if status == "running" else "before it started"
        assert f"server stopped (killed or crashed) {what}" in reason and "resumes from step 0" in reason
        # nothing was applied: resubmitting the same request runs it
        _, created = jobs.submit(groups("a"), TrainSpec(), key=record.idempotency_key, request_sha256="x")
        assert created
    else:
        assert (
            record.result is not None
            and record.result.step == 1
            and "step was applied" in (record.result.message or "")
        )
    text = job_files.job_events_path(storage, job_id).read_text()
    assert text.endswith("\n") and "progr" not in text


async def test_wait_for_event_returns_on_the_next_event_or_the_timeout(storage: ModelStorage) -> None:
    service = ScriptedService()
    service.gate = asyncio.Event()
    jobs = ModelJobs(storage, service, progress=False)  # type: ignore[arg-type]
    jobs.start()
    job, _ = jobs.submit(groups("a"), TrainSpec(), key=None, request_sha256="a")
    await at_the_gate(jobs, job.id)
    cursor = jobs.events_after(job.id, 0, 1000)[0][-1].id  # queued, started, progress x2
    assert not await jobs.wait_for_event(job.id, cursor, 0.1)
    loop = asyncio.get_running_loop()
    threading.Timer(0.1, lambda: loop.call_soon_threadsafe(service.gate.set)).start()  # type: ignore[union-attr]
    assert await jobs.wait_for_event(job.id, cursor, DEADLINE_S)
    assert jobs.events_after(job.id, cursor)[0][0].type == "checkpoint_saved"
    await jobs.close()


async def test_shutdown_fails_queued_jobs_and_leaves_the_running_one_to_the_next_start(
    storage: ModelStorage,
) -> None:
    service = ScriptedService()
    service.gate = asyncio.Event()
    jobs = ModelJobs(storage, service, progress=False)  # type: ignore[arg-type]
    jobs.start()
    running, _ = jobs.submit(groups("a"), TrainSpec(), key=None, request_sha256="a")
    queued, _ = jobs.submit(groups("b"), TrainSpec(), key=None, request_sha256="b")
    await at_the_gate(jobs, running.id)
    await jobs.close(timeout=0.1)
    assert jobs.get(queued.id).status == "failed"  # type: ignore[union-attr]
    assert "shut down before this job started" in (jobs.get(queued.id).error or "")  # type: ignore[union-attr]
    on_disk = ModelJobs(storage, service, progress=False)  # type: ignore[arg-type]
    settled = on_disk.recover()
    assert [j.id for j in settled] == [running.id]


def test_job_ids_are_checked_before_they_touch_the_disk() -> None:
    assert is_job_id(new_job_id())
    for bad in ("job-../../etc/passwd", "job-" + "g" * 24, "x" * 28, "", "job-abc"):
        assert not is_job_id(bad)


def test_a_finished_job_whose_last_event_was_lost_still_ends_with_its_outcome(storage: ModelStorage) -> None:
    """Events are not fsynced; the record is. A crash of the machine may keep the record and lose the last
    event: a client following the events must still see the outcome."""
    from art.backends.remote_protocol import TrainingJob

    job_id = new_job_id()
    result = TrainResult(step=4, metrics={"loss": 0.5})
    record = TrainingJob(
        id=job_id, model="p/m", status="completed", created_at=1.0, request_sha256="x", result=result
    )
    job_files.jobs_dir(storage).mkdir(parents=True)
    job_files.job_path(storage, job_id).write_text(record.model_dump_json())
    job_files.job_events_path(storage, job_id).write_text(
        '{"id": 1, "type": "queued", "created_at": 1.0, "data": {}}\n'
    )
    jobs = ModelJobs(storage, ScriptedService(), progress=False)  # type: ignore[arg-type]
    assert jobs.recover() == []
    events, _ = jobs.events_after(job_id)
    assert [(e.id, e.type) for e in events] == [(1, "queued"), (2, "completed")]
    assert events[-1].data["result"]["step"] == 4
