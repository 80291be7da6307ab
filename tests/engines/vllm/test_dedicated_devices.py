"""Dedicated devices on one node (`trainer_gpu_ids` + `inference_gpu_ids`, the reference's names), with fakes:
vLLM (the fake server) is given the inference GPUs with its tensor / data parallelism and no sleep mode; one
trainer rank (a stand-in process) starts per trainer GPU, with NCCL; layouts that cannot run are refused
before anything loads, naming the field and the fix."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import ValidationError
from test_vllm_engine import fake_python  # noqa: F401 (a fixture)

import art
from art.cluster.placement import plan_devices
from art.engines.factory import start_engine
from art.engines.vllm.vllm_engine import VllmEngine
from art.local import LocalBackend
from art.training.distributed.rank_messages import RankTemplate
from art.training.distributed.ranks import LocalRanks
from art.types import LoRAConfig, RuntimeOptions

# 4 GPUs: 0 and 1 train (a rank each), 2 and 3 serve (one vLLM replica spanning both)
DEDICATED = RuntimeOptions(
    engine="vllm", trainer_gpu_ids=(0, 1), inference_gpu_ids=(2, 3), tensor_parallel_size=2
)


def test_the_plan_gives_vllm_its_gpus_and_each_rank_a_trainer_gpu() -> None:
    plan = plan_devices(DEDICATED, "cuda", cuda_devices=4, cpu_cores=8)
    assert plan.rank_devices == ("cuda:0", "cuda:1")
    assert plan.trainer_device == "cuda:0"  # the service's own copy (canary, saves) beside rank 0
    assert plan.vllm_env == {"CUDA_VISIBLE_DEVICES": "2,3"}
    assert plan.vllm_args == ("--tensor-parallel-size", "2")
    assert not plan.pause_while_training  # inference serves on while a step trains
    replicas = DEDICATED.model_copy(update={"tensor_parallel_size": 1, "inference_replicas": 2})
    assert plan_devices(replicas, "cuda", cuda_devices=4, cpu_cores=8).vllm_args == (
        "--data-parallel-size",
        "2",
    )
    one_rank = DEDICATED.model_copy(update={"train_ranks": 1})
    assert plan_devices(one_rank, "cuda", cuda_devices=4, cpu_cores=8).rank_devices == ()  # no process
    # shared mode as before: one GPU, the engine sleeps through each step
    assert plan_devices(
        RuntimeOptions(engine="vllm"), "cuda:0", cuda_devices=1, cpu_cores=8
    ).pause_while_training


async def test_vllm_starts_on_the_inference_gpus_with_tensor_parallelism_and_no_sleep_mode(
    fake_python: str,  # noqa: F811
    tiny_model_path: Path,
) -> None:
    from transformers import AutoTokenizer

    options = DEDICATED.model_copy(update={"vllm_python": fake_python, "vllm_startup_timeout": 60})
    plan = plan_devices(options, "cuda", cuda_devices=4, cpu_cores=8)

    class Model:
        dtype = "torch.float32"

    engine = await start_engine(
        options,
        base_model=str(tiny_model_path),
        served_name="base",
        model=Model(),
        tokenizer=AutoTokenizer.from_pretrained(tiny_model_path),
        device=plan.engine_device,
        cuda_devices=4,
        plan=plan,
    )
    try:
        assert isinstance(engine, VllmEngine) and not engine.sleep_mode
        headers = {"Authorization": f"Bearer {engine.server.api_key}"}
        launch: dict[str, Any] = httpx.get(f"{engine.server.base_url}/fake/launch", headers=headers).json()
        assert launch["gpus"] == "2,3"
        argv = launch["argv"]
        assert argv[argv.index("--tensor-parallel-size") + 1] == "2"
        assert "--enable-sleep-mode" not in argv and "--data-parallel-size" not in argv
    finally:
        await engine.close()


STAND_IN_RANK = """
import multiprocessing.connection, os, sys
from art.training.distributed.rank_messages import RankInfo
conn = multiprocessing.connection.Connection(int(sys.argv[1]))
setup = conn.recv()
extra = {"backend": setup.backend, "world_size": setup.world_size, "rendezvous": setup.master_port}
conn.send(("ready", RankInfo(rank=setup.rank, pid=os.getpid(), host="here", device=setup.device, extra=extra)))
while conn.recv()[0] != "stop":
    pass
"""


def test_one_rank_process_starts_per_trainer_gpu_with_nccl(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Which processes start, and which device each is given (a stand-in rank: no GPU here)."""
    (tmp_path / "stand_in_rank.py").write_text(textwrap.dedent(STAND_IN_RANK))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    plan = plan_devices(DEDICATED, "cuda", cuda_devices=4, cpu_cores=8)
    template = RankTemplate(base_model="m", dtype="bfloat16", lora=LoRAConfig(), options=DEDICATED)
    ranks = LocalRanks(template, plan.rank_devices, module="stand_in_rank")
    try:
        infos = ranks.start()
        assert [(i.rank, i.device, i.extra["backend"], i.extra["world_size"]) for i in infos] == [
            (0, "cuda:0", "nccl", 2),
            (1, "cuda:1", "nccl", 2),
        ]
        assert len({i.extra["rendezvous"] for i in infos}) == 1 and len(set(ranks.pids())) == 2
    finally:
        ranks.stop()


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"trainer_gpu_ids": (0, 1)}, "trainer_gpu_ids and inference_gpu_ids go together"),
        (
            {"trainer_gpu_ids": (0, 1), "inference_gpu_ids": (1, 2)},
            "overlap on GPU(s) [1]: dedicated GPUs are either the trainer's or inference's",
        ),
        ({"trainer_gpu_ids": (0, 0), "inference_gpu_ids": (1,)}, "trainer_gpu_ids=[0, 0] names a GPU twice"),
        (
            {"trainer_gpu_ids": (0,), "inference_gpu_ids": (1,), "train_ranks": 2},
            "train_ranks=2 but trainer_gpu_ids=[0] has 1 GPU(s): one rank per GPU",
        ),
        (
            {"trainer_gpu_ids": (0,), "inference_gpu_ids": (1, 2)},
            "inference_gpu_ids=[1, 2] has 2 GPU(s) but tensor_parallel_size=1 x inference_replicas=1 = 1",
        ),
        ({"trainer_gpu_ids": (0,), "inference_gpu_ids": (1,), "engine": "torch"}, "set engine='vllm'"),
        ({"inference_replicas": 2, "engine": "torch"}, "inference_replicas=2 needs engine='vllm'"),
        ({"tensor_parallel_size": 2}, "vLLM spans several GPUs only on dedicated ones"),
    ],
)
def test_layouts_that_cannot_run_are_refused_when_the_options_are_made(
    fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        RuntimeOptions(**{"engine": "vllm", **fields})
    assert message in str(caught.value)


@pytest.mark.parametrize("via", ["options", "internal_config"])
async def test_gpu_ids_that_do_not_exist_fail_before_anything_loads(
    via: str,
    fake_python: str,  # noqa: F811
    tmp_path: Path,
    tiny_model_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from art.base_model import loader

    def must_not_load(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the model loaded before the layout was checked")

    monkeypatch.setattr(loader, "load_model_and_tokenizer", must_not_load)
    monkeypatch.setattr(loader, "cuda_device_count", lambda: 2)  # GPUs 0 and 1 exist
    ids = {"trainer_gpu_ids": [0], "inference_gpu_ids": [2]}
    model = art.TrainableModel(
        name="m",
        project="p",
        base_model=str(tiny_model_path),  # there to load (checked first), but never loaded
        _internal_config=ids if via == "internal_config" else None,  # the reference's way to say it
    )
    options = RuntimeOptions(engine="vllm", vllm_python=fake_python, device="cpu")
    if via == "options":
        options = options.model_copy(update={k: tuple(v) for k, v in ids.items()})
    async with LocalBackend(path=str(tmp_path), options=options, progress=False) as backend:
        with pytest.raises(ValueError) as caught:
            await model.register(backend)
    assert str(caught.value) == (
        "inference_gpu_ids=[2]: GPU(s) [2] do not exist; this machine has 2 CUDA GPU(s): 0-1 (set "
        "CUDA_VISIBLE_DEVICES before starting, or give ids that exist)"
    )


def test_ranks_on_gpus_must_be_given_their_gpus() -> None:
    with pytest.raises(ValueError) as caught:
        plan_devices(RuntimeOptions(train_ranks=2), "cuda", cuda_devices=2, cpu_cores=8)
    assert str(caught.value) == (
        "train_ranks=2 on GPUs: name the GPUs that train and the ones that serve, trainer_gpu_ids=[...] and "
        "inference_gpu_ids=[...] with engine='vllm' (docs/scale.md)"
    )
