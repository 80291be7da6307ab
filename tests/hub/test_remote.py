"""`RemoteBackend` against `art serve` started as a real subprocess on 127.0.0.1 with a tiny model: the
training loop, idempotent retries, lost connections, queueing, the error cases, a fuzz, and load."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import io
import json
import random
import tarfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch", reason="needs the `local` extra: pip install -e '.[local]'")

import itertools

import httpx
import openai
from helpers_serve import ServeProcess, start_serve

import art
from art.backends.remote import RemoteError, encode_training_job
from art.remote import RemoteBackend
from art.types import TrainSpec

PROMPT = [{"role": "user", "content": "Reply with digits."}]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, tiny_model_path: Path) -> Iterator[ServeProcess]:
    server = start_serve(
        tmp_path_factory.mktemp("serve") / "art", "--max-body-mib", "1", "--gpu-cost-per-hour-usd", "7.2"
    )
    yield server
    server.stop()


def make_model(name: str, base_model: Path, client_dir: Path) -> art.TrainableModel:
    return art.TrainableModel(name=name, project="t", base_model=str(base_model), base_path=str(client_dir))


async def rollout(model: art.TrainableModel, seed: int) -> art.Trajectory:
    response = await model.openai_client().chat.completions.create(
        model=model.get_inference_name(),
        messages=PROMPT,
        max_tokens=8,
        seed=seed,  # type: ignore[arg-type]
    )
    choice = response.choices[0]
    text = choice.message.content or ""
    return art.Trajectory(messages_and_choices=[*PROMPT, choice], reward=sum(c.isdigit() for c in text) / 8)


async def play(
    model: art.TrainableModel, seed: int, groups: int = 2, size: int = 4
) -> list[art.TrajectoryGroup]:
    played = await art.gather_trajectory_groups(
        [
            art.TrajectoryGroup(rollout(model, seed * 1000 + g * 100 + i) for i in range(size))
            for g in range(groups)
        ],
        pbar_desc=None,
    )
    for g in played:  # every group has something to learn from, whatever the random model wrote
        g.trajectories[0].reward = 1.0
    return played


def api(served: ServeProcess, key: str | None = "") -> httpx.AsyncClient:
    key = served.key if key == "" else key
    headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
    return httpx.AsyncClient(base_url=served.url, headers=headers, timeout=60)


async def job_events(served: ServeProcess, job_id: str) -> list[dict[str, Any]]:
    async with api(served) as client:
        page = (await client.get(f"/v1/art/training-jobs/{job_id}/events", params={"limit": 10_000})).json()
    return list(page["data"])


async def model_jobs(served: ServeProcess, name: str) -> list[dict[str, Any]]:
    async with api(served) as client:
        response = await client.get(f"/v1/art/models/t/{name}/training-jobs", params={"limit": 1000})
    assert response.status_code == 200, response.text
    return list(response.json())


# ---- the training loop ----------------------------------------------------------------------------
async def test_the_training_loop_through_remote_backend(
    served: ServeProcess, tiny_model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = make_model("loop", tiny_model_path, tmp_path)
    async with RemoteBackend(served.url, served.key) as backend:
        await model.register(backend)
        assert (await backend.register(model)).step == 0  # idempotent
        assert model.get_inference_name() == "loop@0" and model.inference_base_url == f"{served.url}/v1"
        for step in range(1, 4):
            groups = await play(model, step)
            result = await model.train(groups, config=art.TrainConfig(learning_rate=1e-3))
            assert result.step == step and result.metrics["canary_logprob_diff"] < 0.05
            assert model.get_inference_name() == f"loop@{step}"
        assert "step 3: training" in capsys.readouterr().err  # the service's progress, shown here
        assert await backend.get_step(model) == 3
        # the client wrote its record; the server kept checkpoints and the jobs' metrics
        history = model.history()
        assert [e["step"] for e in history] == [1, 2, 3]
        assert all("train/reward" in e and "loss/train" in e for e in history)
        # the trainer's record (advantages, per-token values) came back with each job and sits beside its groups
        for step in (1, 2, 3):
            (record,) = model.storage.read_trainer_records("train", step)
            trained = model.storage.trained_groups("train", step)
            assert record.step == step and len(trained) == len(model.storage.read_groups("train", step))
        # each step's wall time, measured on the client, priced at the server's rate (a CPU server: one device)
        assert backend.automatic_gpu_cost_per_hour_usd(model) == 7.2
        assert all(e["costs/gpu"] == pytest.approx(e["time/step_wall_s"] * 7.2 / 3600) for e in history)
        jobs = await model_jobs(served, "loop")
        assert sorted(j["result"]["step"] for j in jobs) == [1, 2, 3]
        assert all("loss" in j["result"]["metrics"] for j in jobs)
        # inference names: the newest step by its bare name and by name@step; an older loaded one too
        client = model.openai_client()
        for name, step in (("loop", 3), ("loop@3", 3), ("loop@2", 2)):
            reply = await client.chat.completions.create(model=name, messages=PROMPT, max_tokens=2)
            assert reply.choices[0].model_extra["checkpoint_step"] == step  # type: ignore[index]
        listed = {m.id for m in (await client.models.list()).data}
        assert {"loop", "loop@3", str(tiny_model_path)} <= listed
        # checkpoints: listed, downloaded (where LocalBackend would have written it), pruned
        checkpoints = await backend.list_checkpoints(model)
        assert [c.step for c in checkpoints] == [0, 1, 2, 3] and [c.current for c in checkpoints][-1]
        folder = Path(await backend._experimental_pull_model_checkpoint(model, step=2))
        assert folder == model.storage.checkpoint_dir(2)
        assert {"adapter_config.json", "adapter_model.safetensors", "art_checkpoint.json"} <= {
            p.name for p in folder.iterdir()
        }
        assert model.storage.checkpoint_steps() == [2]
        out = str(tmp_path / "export")  # a folder of the caller's: filled once, reused for the same step only
        assert await backend._experimental_pull_model_checkpoint(model, step=1, local_path=out) == out
        assert json.loads((tmp_path / "export" / "art_checkpoint.json").read_text())["step"] == 1
        assert await backend._experimental_pull_model_checkpoint(model, step=1, local_path=out) == out
        with pytest.raises(FileExistsError, match=r"local_path .*export is not empty.*checkpoint 3"):
            await backend._experimental_pull_model_checkpoint(model, local_path=out)
        await backend.delete_checkpoints(model, [1])
        assert [c.step for c in await backend.list_checkpoints(model)] == [1, 3]
        events = await job_events(served, jobs[0]["id"])
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["queued", "started"] and kinds[-3:] == [
        "checkpoint_saved",
        "adapter_loaded",
        "completed",
    ]
    progress = [e["data"] for e in events if e["type"] == "progress"]
    assert (
        progress
        and progress[-1]["micro_batch"] == progress[-1]["total"]
        and all("loss" in p for p in progress)
    )


def test_art_demo_remote_runs_the_demo_against_the_server(
    served: ServeProcess, tiny_model_path: Path, tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    from art.cli import app

    result = CliRunner().invoke(
        app,
        ["demo", "--quick", "--remote", served.url, "--api-key", served.key, "--base-model", str(tiny_model_path),
         "--base-path", str(tmp_path), "--name", "remote-demo"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output + repr(result.exception)
    assert f"training on art serve at {served.url}" in result.output
    assert "art serve trains RL only (no SFT step): running the demo as --rl-only" in result.output
    assert "Held-out games (8, the same for both)" in result.output
    history = [
        json.loads(line)
        for line in (tmp_path / "demo/models/remote-demo/history.jsonl").read_text().splitlines()
    ]
    assert any("train/reward" in e for e in history)
    on_server = served.path / "demo/models/remote-demo"
    assert len(list((on_server / "jobs").glob("*.events.jsonl"))) == 2  # its two steps ran on the server
    assert (on_server / "checkpoints/0000").is_dir()
    assert not (tmp_path / "demo/models/remote-demo/checkpoints").exists()  # and nothing of them here


# ---- jobs survive the network -----------------------------------------------------------------------
async def submit_raw(
    served: ServeProcess,
    name: str,
    groups: list[art.TrajectoryGroup],
    base_step: int,
    spec: TrainSpec | None = None,
) -> tuple[bytes, str]:
    return encode_training_job(f"t/{name}", groups, spec or TrainSpec(learning_rate=1e-3), base_step)


async def wait_done(served: ServeProcess, job_id: str) -> dict[str, Any]:
    async with api(served) as client:
        while True:
            job = (await client.get(f"/v1/art/training-jobs/{job_id}")).json()
            if job["status"] in ("completed", "failed"):
                return dict(job)
            await asyncio.sleep(0.1)


async def test_a_retried_submission_is_the_same_job_never_a_second_step(
    served: ServeProcess, tiny_model_path: Path, tmp_path: Path
) -> None:
    model = make_model("retry", tiny_model_path, tmp_path)
    async with RemoteBackend(served.url, served.key) as backend:
        await model.register(backend)
        groups = await play(model, 1)
    body, key = await submit_raw(served, "retry", groups, 0)
    headers = {"Content-Encoding": "gzip", "Idempotency-Key": key}
    url = "/v1/art/models/t/retry/training-jobs"
    async with api(served) as client:
        first, second = await asyncio.gather(
            client.post(url, content=body, headers=headers), client.post(url, content=body, headers=headers)
        )
        assert sorted([first.status_code, second.status_code]) == [200, 202], (first.text, second.text)
        assert first.json()["id"] == second.json()["id"]
        job = await wait_done(served, first.json()["id"])
        assert job["status"] == "completed" and job["result"]["step"] == 1
        late = await client.post(url, content=body, headers=headers)  # a retry after the end: the result
        assert (
            late.status_code == 200
            and late.json()["id"] == job["id"]
            and late.json()["status"] == "completed"
        )
        other, _ = await submit_raw(served, "retry", groups, 0, TrainSpec(learning_rate=2e-3))
        conflict = await client.post(url, content=other, headers=headers)
        assert conflict.status_code == 409 and conflict.json()["error"]["param"] == "Idempotency-Key"
        model_info = (await client.get("/v1/art/models/t/retry")).json()
    assert model_info["step"] == 1  # one step, however often it was asked
    assert len(await model_jobs(served, "retry")) == 1


class CuttableProxy:
    """A TCP proxy to the server whose connections can all be cut at once (and new ones refused a while)."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.writers: set[asyncio.StreamWriter] = set()
        self.refuse_until = 0.0
        self.cut_connections = 0
        self.server: asyncio.Server | None = None

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if time.monotonic() < self.refuse_until:
            writer.close()
            return
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        self.writers |= {writer, up_writer}

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError, OSError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self.writers -= {writer, up_writer}

    def cut(self, refuse_for: float) -> None:
        self.refuse_until = time.monotonic() + refuse_for
        for w in list(self.writers):
            self.cut_connections += 1
            w.transport.abort()

    async def close(self) -> None:
        self.cut(0)
        if self.server is not None:
            self.server.close()


@contextlib.asynccontextmanager
async def proxy_to(served: ServeProcess) -> AsyncIterator[tuple[CuttableProxy, str]]:
    proxy = CuttableProxy(served.port)
    url = await proxy.start()
    try:
        yield proxy, url
    finally:
        await proxy.close()


async def running_job(served: ServeProcess, name: str, count_before: int) -> dict[str, Any]:
    """The model's newest job once a new one runs."""
    while True:
        jobs = await model_jobs(served, name)
        if len(jobs) > count_before and jobs[0]["status"] != "queued":
            return jobs[0]
        await asyncio.sleep(0.02)


async def test_a_client_that_loses_its_connection_mid_step_gets_the_result(
    served: ServeProcess, tiny_model_path: Path, tmp_path: Path
) -> None:
    model = make_model("cut", tiny_model_path, tmp_path)
    async with (
        proxy_to(served) as (proxy, url),
        RemoteBackend(url, served.key, reconnect_seconds=120) as backend,
    ):
        await model.register(backend)
        groups = await play(model, 1, groups=2, size=8)
        # micro_batch_tokens=8: one sequence per micro-batch, so the step lasts long enough to be cut
        train = asyncio.ensure_future(backend.train(model, groups, learning_rate=1e-3, micro_batch_tokens=8))
        job = await running_job(served, "cut", 0)
        cut_at = time.time()
        proxy.cut(refuse_for=2.0)
        # a second client (a restarted one) asks for the same step while it runs: the same job
        again = RemoteBackend(served.url, served.key)
        result_again = await again.train(
            make_model("cut", tiny_model_path, tmp_path), groups, learning_rate=1e-3, micro_batch_tokens=8
        )
        await again.close()
        result = await train
    assert proxy.cut_connections >= 1  # the premise: a connection was cut
    done = await wait_done(served, job["id"])
    assert done["finished_at"] > cut_at  # ... while the step ran
    assert result.step == result_again.step == 1 and done["result"]["step"] == 1
    assert len(await model_jobs(served, "cut")) == 1  # one step, not two


async def test_jobs_of_a_model_are_queued_in_order_never_interleaved(
    served: ServeProcess, tiny_model_path: Path, tmp_path: Path
) -> None:
    model = make_model("queue", tiny_model_path, tmp_path)
    async with RemoteBackend(served.url, served.key, progress=False) as backend:
        await model.register(backend)
        groups = await play(model, 1)
    ids = []
    async with api(served) as client:
        for i in range(3):
            spec = TrainSpec(learning_rate=1e-3 * (i + 1), micro_batch_tokens=8)  # slow steps: the rest queue
            body, key = await submit_raw(served, "queue", groups, 0, spec)
            response = await client.post(
                "/v1/art/models/t/queue/training-jobs",
                content=body,
                headers={"Content-Encoding": "gzip", "Idempotency-Key": key},
            )
            assert response.status_code == 202, response.text
            ids.append(response.json()["id"])
    jobs = [await wait_done(served, job_id) for job_id in ids]
    assert [j["result"]["step"] for j in jobs] == [1, 2, 3]
    assert [j["result"]["metrics"]["learning_rate"] for j in jobs] == pytest.approx([1e-3, 2e-3, 3e-3])
    for earlier, later in itertools.pairwise(jobs):
        assert later["started_at"] >= earlier["finished_at"]
    assert [(await job_events(served, i))[0]["data"]["jobs_ahead"] for i in ids] == [0, 1, 2]


async def registered(
    served: ServeProcess, name: str, base_model: Path, client_dir: Path
) -> art.TrainableModel:
    """A new model, registered with the server (its client closed again)."""
    model = make_model(name, base_model, client_dir)
    async with RemoteBackend(served.url, served.key, progress=False) as backend:
        await model.register(backend)
    return model


async def one_trained_job(
    served: ServeProcess, name: str, base_model: Path, client_dir: Path
) -> tuple[art.TrainableModel, str]:
    """A new model, trained one step through RemoteBackend; (the model, its job id)."""
    model = make_model(name, base_model, client_dir)
    async with RemoteBackend(served.url, served.key, progress=False) as backend:
        await model.register(backend)
        await backend.train(model, await play(model, 1), learning_rate=1e-3)
    return model, (await model_jobs(served, name))[0]["id"]


async def test_job_events_as_server_sent_events(
    served: ServeProcess, tiny_model_path: Path, tmp_path: Path
) -> None:
    _, job_id = await one_trained_job(served, "sse", tiny_model_path, tmp_path)
    async with api(served) as client:
        for headers, first in (({}, 1), ({"Last-Event-ID": "2"}, 3)):
            async with client.stream(
                "GET", f"/v1/art/training-jobs/{job_id}/events/stream", headers=headers
            ) as r:
                assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
                text = (await r.aread()).decode()
            blocks = [b for b in text.split("\n\n") if b.strip()]
            fields = [dict(line.split(": ", 1) for line in b.splitlines()) for b in blocks]
            assert [int(f["id"]) for f in fields] == list(range(first, first + len(fields)))
            assert (
                fields[-1]["event"] == "completed"
                and json.loads(fields[-1]["data"])["data"]["result"]["step"] == 1
            )


# ---- bad input -------------------------------------------------------------------------------------
async def test_wrong_or_missing_keys_get_401_and_never_reach_the_logs(served: ServeProcess) -> None:
    wrong = "art-WRONG-key-0123456789"
    for key in (None, wrong):
        async with api(served, key) as client:
            for method, path in (
                ("GET", "/v1/art/models"),
                ("POST", "/v1/chat/completions"),
                ("GET", "/health"),
            ):
                response = await client.request(method, path, json={})
                assert response.status_code == 401, (key, path, response.text)
                assert response.json()["error"]["code"] == "invalid_api_key"
    async with RemoteBackend(served.url, wrong) as backend:
        with pytest.raises(RemoteError, match="refused the API key") as caught:
            await backend.get_step(make_model("x", Path("."), Path(".")))
    assert caught.value.status == 401
    logs = served.logs()
    assert wrong not in logs and served.key not in logs


async def test_bodies_over_the_limit_get_413(
    served: ServeProcess, tiny_model_path: Path, tmp_path: Path
) -> None:
    await registered(served, "big", tiny_model_path, tmp_path)
    url = "/v1/art/models/t/big/training-jobs"
    big = b"[" + b"1," * 600_000 + b"1]"  # 1.2 MB: the server was started with --max-body-mib 1
    async with api(served) as client:
        plain = await client.post(url, content=big)
        bomb = await client.post(
            url, content=gzip.compress(b" " * (2 << 20)), headers={"Content-Encoding": "gzip"}
        )
        for response in (plain, bomb):
            assert response.status_code == 413 and "1048576" in response.json()["error"]["message"]
        assert (
            len(gzip.compress(b" " * (2 << 20))) < 10_000
        )  # the premise: a small body that inflates past the limit
        assert (await client.get("/v1/art/models/t/big")).json()["step"] == 0


def training_body(**override: Any) -> dict[str, Any]:
    trajectory = {"messages_and_choices": [{"role": "user", "content": "hi"}], "reward": 1.0}
    body: dict[str, Any] = {"trajectory_groups": [{"trajectories": [trajectory]}], "spec": {}}
    body.update(override)
    return body


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (training_body(trajectory_groups=[{"trajectories": [{"messages_and_choices": [], "reward": "high"}]}]),
         "trajectory_groups[0].trajectories[0].reward"),
        (training_body(trajectory_groups=[{"trajectories": [{"messages_and_choices": [{"role": "robot", "content": "x"}], "reward": 1}]}]),
         "trajectory_groups[0].trajectories[0].messages_and_choices"),
        (training_body(trajectory_groups="all of them"), "trajectory_groups"),
        (training_body(trajectory_groups=[3]), "trajectory_groups[0]"),
        (training_body(spec={"learning_rate": -1}), "spec.learning_rate"),
        (training_body(spec={"loss_fn": "magic"}), "spec.loss_fn"),
        (training_body(spec={"learning_rat": 1e-5}), "spec.learning_rat"),
        (training_body(base_step=-2), "base_step"),
        (training_body(groups=[]), "groups"),
        ([1, 2], "body"),
    ],
)  # fmt: skip
async def test_malformed_training_jobs_get_422_naming_the_field(
    served: ServeProcess, tiny_model_path: Path, tmp_path: Path, body: Any, param: str
) -> None:
    await registered(served, "malformed", tiny_model_path, tmp_path)
    async with api(served) as client:
        response = await client.post(
            "/v1/art/models/t/malformed/training-jobs",
            content=gzip.compress(json.dumps(body).encode()),
            headers={"Content-Encoding": "gzip"},
        )
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["param"] == param and param.split(".")[-1].split("[")[0] in error["message"]


async def test_unknown_models_jobs_and_checkpoints_get_404(
    served: ServeProcess, tiny_model_path: Path, tmp_path: Path
) -> None:
    await registered(served, "known", tiny_model_path, tmp_path)
    async with api(served) as client:
        for method, path in (
            ("GET", "/v1/art/models/t/nobody"),
            ("POST", "/v1/art/models/t/nobody/training-jobs"),
            ("GET", "/v1/art/training-jobs/job-000000000000000000000000"),
            ("GET", "/v1/art/training-jobs/../../etc/passwd/events"),
            ("GET", "/v1/art/training-jobs/not-a-job/events/stream"),
            ("GET", "/v1/art/models/t/known/checkpoints/7"),
            ("DELETE", "/v1/art/models/t/known/checkpoints/7"),
            ("GET", "/v1/art/nothing-here"),
        ):
            response = await client.request(method, path, content=b"{}")
            assert response.status_code == 404, (path, response.text)
            assert response.json()["error"]["message"]
        chat = await client.post("/v1/chat/completions", json={"model": "nobody@3", "messages": PROMPT})
        assert chat.status_code == 404 and chat.json()["error"]["code"] == "model_not_found"
        current = await client.delete("/v1/art/models/t/known/checkpoints/0")
        assert current.status_code == 409  # the step it serves is never deleted


async def test_a_name_taken_by_another_project_or_base_model_is_refused(
    served: ServeProcess, tiny_model_path: Path, tmp_path: Path
) -> None:
    async with RemoteBackend(served.url, served.key) as backend:
        await make_model("taken", tiny_model_path, tmp_path).register(backend)
        other = art.TrainableModel(
            name="taken", project="other", base_model=str(tiny_model_path), base_path=str(tmp_path / "o")
        )
        with pytest.raises(RemoteError, match="already served here for project 't'") as caught:
            await other.register(backend)
        assert caught.value.status == 409
        changed = art.TrainableModel(
            name="taken", project="t", base_model="another-base", base_path=str(tmp_path / "c")
        )
        with pytest.raises(RemoteError, match="already served with base_model"):
            await changed.register(backend)
    async with api(served) as client:
        missing = await client.post(
            "/v1/art/models",
            json={"project": "t", "name": "ghost", "base_model": str(tmp_path / "no-such-model")},
        )
    assert missing.status_code == 422 and missing.json()["error"]["param"] == "base_model"


# ---- fuzz and load ---------------------------------------------------------------------------------
def malformed_requests(
    rng: random.Random, job_id: str, n: int
) -> Iterator[tuple[str, str, bytes, dict[str, str]]]:
    """`n` malformed requests to the /v1/art/ routes: wrong shapes, types, encodings, paths and headers."""
    good_group = {
        "trajectories": [{"messages_and_choices": [{"role": "user", "content": "hi"}], "reward": 1.0}]
    }
    corruptions: list[Any] = [
        lambda: {"trajectory_groups": [{**good_group, "trajectories": [{"reward": "x"}]}]},
        lambda: {"trajectory_groups": [{"trajectories": [{"messages_and_choices": 5, "reward": 1}]}]},
        lambda: {
            "trajectory_groups": [
                {"trajectories": [{"messages_and_choices": [{"role": "robot"}], "reward": 1}]}
            ]
        },
        lambda: {
            "trajectory_groups": [good_group],
            "spec": {"learning_rate": rng.choice([-1, "fast", None, [], 0])},
        },
        lambda: {"trajectory_groups": [good_group], "spec": {rng.choice(["lr", "loss", ""]): 1}},
        lambda: {"trajectory_groups": [good_group], "base_step": rng.choice([-1, "3", 1.5, True])},
        lambda: {"trajectory_groups": rng.choice([None, 1, "x", {}, [None], [[]], [1.5]])},
        lambda: {"trajectory_groups": [good_group], rng.choice(["extra", "model", "x" * 300]): 1},
        lambda: rng.choice([[], 1, "s", None, True]),
        lambda: {"project": rng.choice(["../x", "", 3, "a b"]), "name": "n", "base_model": "m"},
        lambda: {"project": "p", "name": rng.choice(["..", "x/y", None, "é"]), "base_model": "m"},
        lambda: {"project": "p", "name": "n", "base_model": rng.choice(["", None, 5]), "extra": 1},
        lambda: {
            "project": "p",
            "name": "n",
            "base_model": "m",
            "lora_config": {"r": rng.choice([0, -1, "x"])},
        },
    ]
    paths = [
        ("POST", "/v1/art/models"), ("POST", "/v1/art/models/t/fuzz/training-jobs"),
        ("GET", f"/v1/art/training-jobs/{job_id}/events"), ("GET", "/v1/art/models/t/fuzz/checkpoints"),
        ("GET", f"/v1/art/training-jobs/{job_id}/events/stream"),
    ]  # fmt: skip
    for i in range(n):
        method, path = rng.choice(paths)
        headers: dict[str, Any] = {}
        kind = i % 10
        if kind <= 4:
            body = json.dumps(rng.choice(corruptions)()).encode()
        elif kind == 5:  # broken JSON
            raw = json.dumps(corruptions[0]()).encode()
            body = raw[: rng.randrange(len(raw))]
        elif kind == 6:  # bytes, or JSON nested past any parser's depth
            body = rng.choice([rng.randbytes(rng.randrange(1, 200)), b"[" * 100_000, b'{"a":' * 50_000])
        elif kind == 7:  # bad gzip
            body = rng.choice([rng.randbytes(64), gzip.compress(b"{}")[:-8], gzip.compress(b"not json")])
            headers["Content-Encoding"] = rng.choice(["gzip", "br", "deflate, gzip", "GZIP"])
        elif kind == 8:  # bad query strings and path segments
            body = b""
            method = "GET"
            path = rng.choice([
                f"/v1/art/training-jobs/{job_id}/events?after=-1", f"/v1/art/training-jobs/{job_id}/events?limit=0",
                f"/v1/art/training-jobs/{job_id}/events?wait=1e9", f"/v1/art/training-jobs/{job_id}/events?after=x",
                "/v1/art/models/t/fuzz/checkpoints/abc", "/v1/art/models/t/fuzz/checkpoints?order=sideways",
                "/v1/art/models/%2e%2e/%2e%2e/checkpoints", "/v1/art/models/t/fuzz/checkpoints/99999999999999999999999",
                "/v1/art/training-jobs/" + "a" * 5000, f"/v1/art/training-jobs/{job_id}/events?limit=99999999999999999999",
            ])  # fmt: skip
            if rng.random() < 0.2:
                method, path = (
                    "DELETE",
                    rng.choice(
                        ["/v1/art/models/t/fuzz/checkpoints?keep=x", "/v1/art/models/t/fuzz/checkpoints/-1"]
                    ),
                )
        else:  # bad headers
            body = json.dumps(corruptions[0]()).encode()
            headers["Idempotency-Key"] = rng.choice([b"", b"x" * 300, b"a b", "\xe9t\xe9".encode("latin-1")])
            if rng.random() < 0.5:
                headers["Last-Event-ID"] = rng.choice([b"x", b"-1", b"1e3", b"\xff"])
        yield method, path, body, headers


async def test_a_fuzz_of_500_malformed_requests_gets_no_5xx_and_leaves_the_server_healthy(
    served: ServeProcess, tiny_model_path: Path, tmp_path: Path
) -> None:
    model, job_id = await one_trained_job(served, "fuzz", tiny_model_path, tmp_path)
    statuses: dict[int, int] = {}
    async with api(served) as client:
        for method, path, body, headers in malformed_requests(random.Random(24), job_id, 500):
            response = await client.request(method, path, content=body, headers=headers)
            statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
            assert response.status_code < 500, (method, path, body[:200], headers, response.text)
            if response.status_code >= 400:
                assert response.json()["error"]["message"]
        assert sum(statuses.values()) == 500
        assert (await client.get("/health")).json() == {"status": "ok"}
        assert (await client.get("/v1/art/models/t/fuzz")).json()["step"] == 1  # no step taken by the fuzz
    assert len(await model_jobs(served, "fuzz")) == 1
    reply = await model.openai_client().chat.completions.create(model="fuzz", messages=PROMPT, max_tokens=2)
    assert reply.choices[0].message is not None
    assert set(statuses) <= {200, 400, 404, 405, 409, 413, 415, 422}, statuses


async def test_200_concurrent_chat_requests_all_succeed(
    served: ServeProcess, tiny_model_path: Path, tmp_path: Path
) -> None:
    await registered(served, "load", tiny_model_path, tmp_path)
    client = openai.AsyncOpenAI(base_url=f"{served.url}/v1", api_key=served.key, max_retries=0, timeout=300)

    async def ask(i: int) -> int:
        reply = await client.chat.completions.create(model="load@0", messages=PROMPT, max_tokens=4, seed=i)  # type: ignore[arg-type]
        return len(reply.choices[0].token_ids)  # type: ignore[attr-defined]

    results = await asyncio.gather(*(ask(i) for i in range(200)), return_exceptions=True)
    errors = [r for r in results if isinstance(r, BaseException)]
    assert errors == [] and all(1 <= n <= 4 for n in results)  # type: ignore[operator]
    await client.close()


async def test_checkpoint_download_is_a_tar_of_the_peft_folder(
    served: ServeProcess, tiny_model_path: Path, tmp_path: Path
) -> None:
    await registered(served, "tar", tiny_model_path, tmp_path)
    async with api(served) as client:
        response = await client.get("/v1/art/models/t/tar/checkpoints/0")
    assert response.status_code == 200 and response.headers["content-type"] == "application/x-tar"
    with tarfile.open(fileobj=io.BytesIO(response.content)) as tar:
        names = set(tar.getnames())
    assert {"0000/adapter_config.json", "0000/adapter_model.safetensors", "0000/art_checkpoint.json"} <= names
