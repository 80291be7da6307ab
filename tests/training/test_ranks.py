"""Trainer ranks (`train_ranks=N`): N gloo processes train each step and give the adapter one process gives;
a rank killed mid-step fails the step cleanly, it rolls back, the ranks restart and the next step trains;
one rank spawns nothing; more ranks than cores fail before anything loads."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import psutil
import pytest

pytest.importorskip("torch")

import torch
from helpers_scale import FAST, adapter, make_model, play

from art.local import LocalBackend
from art.service.service import StepError
from art.types import TrainSharding

# Several micro-batches per step, so both ranks have work (and rank 0 reports progress mid-step).
TRAIN: dict[str, Any] = {"learning_rate": 1e-2, "micro_batch_tokens": 64}
# the parity test's second step adds a KL penalty: a base-model forward per micro-batch (FSDP2 gathers for it too),
# and a trust region tight enough to scale that step back (the ranks score their sample and agree on its KL)
KL: list[dict[str, Any]] = [{}, {"kl_penalty_coef": 0.5, "max_step_kl": 1e-3}]


def rank_processes() -> list[psutil.Process]:
    """This process's children that are trainer ranks."""
    return [
        p
        for p in psutil.Process().children(recursive=True)
        if "art.training.distributed.rank_main" in " ".join(p.cmdline())
    ]


@pytest.mark.slow
@pytest.mark.parametrize("sharding", ["ddp", "fsdp2"])
async def test_two_gloo_ranks_train_the_adapter_one_process_trains(
    tiny_model_path: Path, tmp_path: Path, sharding: TrainSharding
) -> None:
    one = make_model(tmp_path / "one", tiny_model_path)
    two = make_model(tmp_path / "two", tiny_model_path)
    steps, norms, scales = [], [], []
    async with LocalBackend(progress=False, options=FAST) as backend:
        await one.register(backend)
        assert backend.service(one).ranks is None
        for step in range(2):
            # 9 sequences, one micro-batch each: 5 for rank 0, 4 for rank 1 (FSDP2 pads rank 1 with a pass)
            groups = await play(one, step, groups=3, size=3)
            steps.append(groups)
            metrics = (await backend.train(one, groups, **TRAIN, **KL[step])).metrics
            norms.append(metrics["loss/grad_norm"])
            scales.append(metrics["update_scale"])
    assert scales[0] == 1.0 and 0 < scales[1] < 1, scales
    async with LocalBackend(progress=False, options=FAST, train_ranks=2, train_sharding=sharding) as backend:
        await two.register(backend)
        ranks = backend.service(two).ranks
        assert ranks is not None and ranks.world_size == 2
        assert [p.pid for p in rank_processes()] == [info.pid for info in ranks.infos]
        for groups, norm, kl, scale in zip(steps, norms, KL, scales, strict=True):  # the same data
            result = await backend.train(two, groups, **TRAIN, **kl)
            # the same scale within the float noise of the sample's logprobs (the ranks score it in eval mode)
            assert result.metrics["update_scale"] == pytest.approx(scale, rel=1e-3)
            assert result.metrics["train_ranks"] == 2.0
            # the norm the gradients are clipped by: over the whole step's gradient (every rank's shard)
            assert result.metrics["loss/grad_norm"] == pytest.approx(norm, rel=1e-4)
            assert result.metrics["num_micro_batches"] >= 4  # both ranks trained some
    held = [info.extra["param_bytes"] / info.extra["model_param_bytes"] for info in ranks.infos]
    # each DDP rank holds the whole model; each FSDP2 rank about half of it (its shard of every weight)
    assert held == [1.0, 1.0] if sharding == "ddp" else all(0.45 < h < 0.55 for h in held), held
    for step in (1, 2):
        trained_by_one, trained_by_two = adapter(one, step), adapter(two, step)
        assert trained_by_one.keys() == trained_by_two.keys()
        for name, value in trained_by_one.items():
            assert isinstance(value, torch.Tensor)
            if name.endswith((".exp_avg", ".exp_avg_sq")):
                # the AdamW moments are linear in the gradients (and their squares): the same sums in another
                # order agree to float noise (measured: 1.1e-4 of each tensor's largest value after two steps);
                # a gradient off by the ranks' factor would be off by x2 (x4)
                scale = float(value.abs().max())
                torch.testing.assert_close(
                    trained_by_two[name], value, rtol=1e-3, atol=1e-3 * scale, msg=name
                )
            else:
                # AdamW divides by sqrt(v): where an element's gradient is near zero, float noise in it becomes a
                # visible share of the learning rate (1e-2), so single elements may differ by more than the rest
                # and the check is on the tensor as a whole. Measured after two steps (|difference| per tensor,
                # relative to the tensor's norm; the largest single element; elements off by more than 2e-5):
                #   DDP, AVX-512 BF16 + AMX kernels:                  5.3e-6, 6.8e-6, 0 of 32,824
                #   DDP, MKL's AVX2 path + oneDNN AVX-512 BF16 (AMD): 4.0e-5, 6.5e-5, 3
                #   FSDP2 (its ranks run the model's own decoder), AMX: 3.2e-5, 5.2e-5, 2
                #   FSDP2, MKL's AVX2 path (AMD-like; 1.7e-4 on one element with AVX2 kernels):
                #                                                     1.5e-4, 2.5e-4, 5
                # Bounds: relative 1.5e-3 (10x the worst), no element off by a tenth of the learning rate (1e-3,
                # 4x the worst), at most 1% of elements past 2e-5. An AdamW step moves most elements by about the
                # learning rate (1e-2), so ranks that trained other data or skipped a rank's gradient are far out.
                difference = (trained_by_two[name] - value).abs()
                relative = float(difference.norm() / value.norm().clamp_min(1e-12))
                assert relative <= 1.5e-3, (name, relative)
                assert float(difference.max()) <= 1e-3, (name, float(difference.max()))
                noisy = difference > 2e-5
                assert float(noisy.float().mean()) <= 0.01, (name, int(noisy.sum()))
        assert any(  # and the adapter did move: a test that would pass with nothing trained proves nothing
            "lora_B" in name and float(value.abs().max()) > 1e-3  # type: ignore[union-attr]
            for name, value in trained_by_one.items()
            if name.endswith("weight")
        )
    assert rank_processes() == []  # closed with the backend


@pytest.mark.slow
@pytest.mark.parametrize("sharding", ["ddp", "fsdp2"])
async def test_a_rank_killed_mid_step_fails_the_step_which_rolls_back_and_the_ranks_restart(
    tiny_model_path: Path, tmp_path: Path, sharding: TrainSharding
) -> None:
    model = make_model(tmp_path, tiny_model_path)
    async with LocalBackend(progress=False, options=FAST, train_ranks=2, train_sharding=sharding) as backend:
        await model.register(backend)
        service = backend.service(model)
        assert (await backend.train(model, await play(model, 0), **TRAIN)).step == 1
        ranks = service.ranks
        assert ranks is not None
        first_pids = [info.pid for info in ranks.infos]
        before = adapter(model, 1)

        real_run_step = ranks.backend.run_step

        def kill_rank_1_when_rank_0_is_training(step: Any, on_micro_batch: Any) -> Any:
            def progress(done: int, total: int, loss: float) -> None:
                if done == 1:  # rank 0 finished its first micro-batch: the step is under way
                    os.kill(first_pids[1], signal.SIGKILL)
                if on_micro_batch is not None:
                    on_micro_batch(done, total, loss)

            return real_run_step(step, progress)

        ranks.backend.run_step = kill_rank_1_when_rank_0_is_training  # type: ignore[method-assign]
        groups = await play(model, 1)
        with pytest.raises(StepError) as caught:
            await backend.train(model, groups, **TRAIN)
        ranks.backend.run_step = real_run_step  # type: ignore[method-assign]
        message = str(caught.value)
        assert f"trainer rank 1 (pid {first_pids[1]}) died while training a step" in message, message
        assert "killed by SIGKILL" in message and "Rolled back" in message
        assert caught.value.phase == "training" and caught.value.restored_step == 1
        # nothing committed, nothing lost: step 1 is served and on disk as it was; no rank is left behind
        assert model.storage.checkpoint_steps() == [0, 1] and service.step == 1
        assert all(
            not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie" for pid in first_pids
        )
        assert adapter(model, 1).keys() == before.keys()

        result = await backend.train(model, groups, **TRAIN)  # the next step trains, on fresh ranks
        assert result.step == 2 and result.metrics["train_ranks"] == 2.0
        assert ranks.starts == 2
        assert all(info.extra["sharding"] == sharding for info in ranks.infos)
        new_pids = [info.pid for info in ranks.infos]
        assert set(new_pids).isdisjoint(first_pids)
        assert sorted(p.pid for p in rank_processes()) == sorted(new_pids)


async def test_one_rank_starts_no_process(tiny_model_path: Path, tmp_path: Path) -> None:
    model = make_model(tmp_path, tiny_model_path)
    async with LocalBackend(progress=False, options=FAST, train_ranks=1) as backend:
        await model.register(backend)
        assert backend.service(model).ranks is None
        assert rank_processes() == []
        assert (await backend.train(model, await play(model, 0), **TRAIN)).step == 1
        assert rank_processes() == []


async def test_more_ranks_than_cores_fail_before_anything_loads(tmp_path: Path) -> None:
    cores = os.cpu_count() or 1
    unloadable = tmp_path / "unloadable-model"  # passes the base-model check; loading it would fail otherwise
    unloadable.mkdir()
    (unloadable / "config.json").write_text('{"model_type": "no-such-architecture"}')
    model = make_model(tmp_path, unloadable)  # never loaded: the rank count is refused first
    async with LocalBackend(progress=False, options=FAST, train_ranks=cores + 1) as backend:
        with pytest.raises(ValueError) as caught:
            await model.register(backend)
    assert str(caught.value).startswith(f"train_ranks={cores + 1} but this machine has {cores} CPU core(s)")
    assert rank_processes() == []
