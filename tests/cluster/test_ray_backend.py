"""`art.ray.RayBackend` on a two-node Ray cluster on 127.0.0.1: 2 inference replicas (torch engine, CPU) behind
one endpoint, 2 trainer ranks, 3 steps; a replica killed mid-rollout (its requests retried on the other, the
replica restarted) and a trainer actor killed as a step starts (the other rank is ended, the step rolls back,
the next one trains on fresh rank actors)."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

pytest.importorskip("ray", reason="needs the `ray` extra: pip install -e '.[ray]'")
pytest.importorskip("torch")

from helpers_scale import FAST, adapter, make_model, play, rollout

import art
from art.cluster.ray_cluster import RayClusterError
from art.cluster.replicas import RayReplicasEngine
from art.ray import RayBackend
from art.service.service import StepError

TRAIN: dict[str, Any] = {"learning_rate": 1e-2, "micro_batch_tokens": 64}


async def until(condition: Any, timeout: float, what: str, every: float = 0.5) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(every)


async def test_two_replicas_on_two_nodes_serve_one_endpoint_and_switch_to_the_trained_step(
    ray_cluster: str, tiny_model_path: Path, tmp_path: Path
) -> None:
    """The default suite's Ray test (the fault test below is `-m cluster`: it takes minutes here)."""
    # a cluster without room for what is asked is refused before anything loads
    with pytest.raises(RayClusterError) as refused:
        RayBackend(ray_cluster, inference_replicas=3, train_ranks=2, path=str(tmp_path / "none"))
    assert str(refused.value) == (
        f"the Ray cluster at {ray_cluster} has 4 CPU(s); 3 inference replica(s) and 2 trainer rank(s) need 5 "
        "(one each): add nodes, or ask for fewer"
    )
    assert not (tmp_path / "none").exists()

    shared = tmp_path / "shared"
    model = make_model(shared, tiny_model_path)
    async with RayBackend(
        ray_cluster, inference_replicas=2, path=str(shared), progress=False, options=FAST
    ) as backend:
        await model.register(backend)
        engine = backend.service(model).engine
        assert isinstance(engine, RayReplicasEngine)
        assert len({r.info["node_id"] for r in engine.replicas}) == 2  # one replica per node (SPREAD)
        assert len({r.info["pid"] for r in engine.replicas}) == 2 and backend.service(model).ranks is None
        result = await backend.train(model, await play(model, 0), **TRAIN)
        assert result.step == 1
        assert all(r.served > 0 for r in engine.replicas)  # both replicas answered the one endpoint
        # both replicas switched to the trained step: every request to the model now gets step 1
        await asyncio.gather(*(rollout(model, seed=700 + i, reward=1.0, max_tokens=2) for i in range(4)))
        replies = await asyncio.gather(
            *(
                model.openai_client().chat.completions.create(
                    model=model.name, messages=[{"role": "user", "content": "hi"}], max_tokens=1
                )
                for _ in range(4)
            )
        )
        assert {r.choices[0].model_extra["checkpoint_step"] for r in replies} == {1}  # type: ignore[index]
        assert all(r.served >= 3 for r in engine.replicas)


@pytest.mark.cluster
async def test_replicas_and_ranks_on_two_nodes_survive_a_dead_replica_and_a_dead_rank(
    ray_cluster: str, tiny_model_path: Path, tmp_path: Path
) -> None:
    shared = tmp_path / "shared"  # storage every node reads: here, the same disk
    model = make_model(shared, tiny_model_path)
    async with RayBackend(
        ray_cluster, inference_replicas=2, train_ranks=2, path=str(shared), progress=False, options=FAST
    ) as backend:
        await model.register(backend)
        service = backend.service(model)
        engine = service.engine
        assert isinstance(engine, RayReplicasEngine)
        assert len({r.info["node_id"] for r in engine.replicas}) == 2  # one replica per node (SPREAD)
        ranks = service.ranks
        assert ranks is not None and ranks.world_size == 2

        # step 1: rollouts through the one endpoint, trained by two rank actors
        assert (await backend.train(model, await play(model, 0), **TRAIN)).step == 1
        assert all(r.served > 0 for r in engine.replicas)  # both replicas answered

        # a replica killed mid-rollout: every request still answers (retried on the other replica)
        victim = engine.replicas[0]
        old_pid = victim.info["pid"]
        rollouts = [
            asyncio.ensure_future(rollout(model, seed=500 + i, reward=1.0, max_tokens=400)) for i in range(8)
        ]
        await until(lambda: victim.in_flight > 0, 60, "a request on replica 0", every=0.01)
        os.kill(old_pid, signal.SIGKILL)
        trajectories = await asyncio.gather(*rollouts)
        assert len(trajectories) == 8 and all(
            len(t.messages_and_choices[-1].logprobs.content) == 400 for t in trajectories
        )  # type: ignore[union-attr]
        assert engine.replicas[1].served >= 8  # the killed replica's requests were answered by the other
        # ... and the replica restarted (a new process, the adapters replayed) and serves again
        await until(lambda: victim.up and victim.restarts == 1, 300, "replica 0 to come back")
        assert victim.info["pid"] != old_pid
        served_before = victim.served
        await asyncio.gather(*(rollout(model, seed=900 + i, reward=1.0) for i in range(6)))
        assert victim.served > served_before
        reply = await model.openai_client().chat.completions.create(
            model=f"{model.name}@1", messages=[{"role": "user", "content": "hi"}], max_tokens=2
        )
        assert reply.choices[0].model_extra["checkpoint_step"] == 1  # type: ignore[index]

        # step 2 trains
        groups = await play(model, 1)
        assert (await backend.train(model, groups, **TRAIN)).step == 2

        # a trainer actor killed mid-step: the step fails cleanly and rolls back
        first_pids = [info.pid for info in ranks.infos]
        real_run_step = ranks.backend.run_step

        def kill_rank_1_mid_step(step: Any, on_micro_batch: Any) -> Any:
            # Once rank 1 has worked on the step (its CPU time grows: it loads the served checkpoint and trains),
            # it is killed; rank 0 trains its share and then waits for rank 1 in the all-reduce: the supervisor
            # must see rank 1's death and end rank 0 too. (Ray ranks report no progress to time a kill by.)
            victim = psutil.Process(first_pids[1])
            idle = sum(victim.cpu_times()[:2])

            def kill_once_busy() -> None:
                while sum(victim.cpu_times()[:2]) < idle + 0.02:
                    time.sleep(0.002)
                killed.append(time.monotonic())
                victim.kill()

            killer = threading.Thread(target=kill_once_busy, daemon=True)
            killer.start()
            try:
                return real_run_step(step, on_micro_batch)
            finally:
                killer.join(30)

        killed: list[float] = []
        ranks.backend.run_step = kill_rank_1_mid_step  # type: ignore[method-assign]
        groups = await play(model, 2, groups=4, size=8)  # a longer step: many micro-batches each
        before = adapter(model, 2)
        with pytest.raises(StepError) as caught:
            await backend.train(model, groups, **TRAIN)
        ranks.backend.run_step = real_run_step  # type: ignore[method-assign]
        assert len(killed) == 1  # killed after the step reached it, before it could finish
        message = str(caught.value)
        assert "trainer rank 1 (a Ray actor) died while training a step" in message, message
        assert "Rolled back" in message and caught.value.restored_step == 2
        assert model.storage.checkpoint_steps() == [0, 1, 2] and service.step == 2
        assert adapter(model, 2).keys() == before.keys()

        # the next step trains, on fresh rank actors: 3 steps in all
        result = await backend.train(model, groups, **TRAIN)
        assert result.step == 3 and result.metrics["train_ranks"] == 2.0
        assert ranks.starts == 2 and set(i.pid for i in ranks.infos).isdisjoint(first_pids)
        reply = await model.openai_client().chat.completions.create(
            model=model.name, messages=[{"role": "user", "content": "hi"}], max_tokens=2
        )
        assert reply.choices[0].model_extra["checkpoint_step"] == 3  # type: ignore[index]
    # closed: the replicas and ranks left the cluster
    import ray

    await until(lambda: ray.available_resources().get("CPU", 0) == 4, 60, "the cluster's CPUs to be free")


def test_an_address_that_does_not_answer_is_refused_at_once(tmp_path: Path) -> None:
    start = time.monotonic()
    with pytest.raises(RayClusterError) as caught:
        RayBackend("127.0.0.1:9", inference_replicas=2, path=str(tmp_path))
    assert time.monotonic() - start < 10
    assert str(caught.value).startswith("the Ray cluster at 127.0.0.1:9 does not answer")
    assert "ray start --head --port 9" in str(caught.value)
    model = art.TrainableModel(name="m", project="p", base_model="x", base_path=str(tmp_path))
    assert not model.storage.root.exists()  # nothing was made


@pytest.mark.cluster
async def test_art_serve_with_a_ray_address_trains_over_http(
    ray_cluster: str, tiny_model_path: Path, tmp_path: Path
) -> None:
    import ray
    from helpers_serve import start_serve

    from art.backends.remote import RemoteBackend

    served = start_serve(
        tmp_path / "serve", "--ray-address", ray_cluster, "--inference-replicas", "2", "--train-ranks", "2",
        "--device", "cpu",
    )  # fmt: skip
    try:
        model = make_model(tmp_path / "client", tiny_model_path, name="remote")
        async with RemoteBackend(served.url, served.key) as backend:
            await model.register(backend)
            # the server placed 2 replicas and 2 ranks on the cluster: one CPU each, all four it has
            await until(lambda: ray.available_resources().get("CPU", 0) == 0, 60, "the actors to be placed")
            for step in (1, 2):
                result = await backend.train(model, await play(model, step), **TRAIN)
                assert result.step == step and result.metrics["train_ranks"] == 2.0
    finally:
        served.stop()
    assert "ART serving at" in served.logs()


def test_art_serve_refuses_a_ray_address_that_does_not_answer(tmp_path: Path) -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "art", "serve", "--path", str(tmp_path), "--ray-address", "127.0.0.1:9"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "--ray-address: the Ray cluster at 127.0.0.1:9 does not answer" in done.stderr, done.stderr
