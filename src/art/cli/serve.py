"""The logic behind `art serve`, `art launch` and `art demo --remote` (`art/cli.py` only wraps these).

Each command checks all its options first (`art.cli_checks`: one line, exit 2), then starts anything."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from art.cli import checks as check
from art.cli.checks import CLIError
from art.types import RuntimeOptions

if TYPE_CHECKING:
    from art.examples.tic_tac_toe.train import DemoConfig

Echo = Callable[[str], None]


def serve_command(
    host: str,
    port: int,
    path: Path,
    api_key_file: Path | None,
    no_api_key: bool,
    device: str,
    engine: str,
    max_body_mib: int,
    gpu_cost_per_hour_usd: float | None = None,
    base_model_roots: list[Path] | None = None,
    *,
    echo: Echo,
) -> None:
    """`art serve`: check every option (a bad one is CLIError: one line, exit 2), then serve until stopped."""
    from art.metrics.gpu import check_gpu_cost_per_hour_usd
    from art.serve.app import ServeConfig, ServeError, run

    check.port("--port", port)
    check.one_of("--engine", engine, ("torch", "vllm"))
    if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", device):
        raise CLIError("--device", f"{device!r} is not a device", "give auto, cpu, cuda or cuda:N")
    try:
        options = RuntimeOptions(device=device, engine=engine).with_env_overrides()
    except ValidationError as e:  # ART_DEVICE / ART_ENGINE in the environment override the flags
        raise check.from_validation_error(
            e, {"device": "--device (or ART_DEVICE)", "engine": "--engine (or ART_ENGINE)"}
        ) from None
    except ValueError as e:
        raise CLIError("--device/--engine", str(e)) from None
    check.at_least("--max-body-mib", max_body_mib, 1, "the largest request body")
    if gpu_cost_per_hour_usd is not None and not 0 <= gpu_cost_per_hour_usd < float("inf"):
        raise CLIError(
            "--gpu-cost-per-hour-usd",
            f"{gpu_cost_per_hour_usd} is not an hourly price",
            "give what one GPU (on a CPU: the machine) costs per hour in USD, a number >= 0, or leave it out",
        )
    gpu_cost = check_gpu_cost_per_hour_usd(gpu_cost_per_hour_usd)
    check.folder_or_new("--path", path)
    if api_key_file is not None and api_key_file.is_dir():
        raise CLIError("--api-key-file", f"{api_key_file} is a folder", "give the key file's path")
    config = ServeConfig(
        host=host,
        port=port,
        path=path,
        api_key_file=api_key_file,
        no_api_key=no_api_key,
        max_body_bytes=max_body_mib * 2**20,
        options=options,
        gpu_cost_per_hour_usd=gpu_cost,
        base_model_roots=tuple(base_model_roots or ()),
    )
    try:
        run(config, echo=echo)
    except ServeError as e:  # the key file or the address, refused before any model loads
        problem, _, fix = str(e).partition("; ")
        raise CLIError(e.flag, problem, fix) from None


def launch_command(
    cluster: str,
    gpu: str,
    port: int,
    engine: str,
    infra: str | None,
    source: Path | None,
    path: Path,
    run: bool,
    *,
    echo: Echo,
) -> None:
    """`art launch`: check the options, write the SkyPilot task and print how to start it and connect (with
    --run, start it)."""
    from art.serve.launch import LaunchConfig, default_source, instructions, launch, write_launch

    check.record_name("--cluster", cluster)
    if not re.fullmatch(r"[A-Za-z0-9_-]+(:\d+)?", gpu):
        raise CLIError(
            "--gpu", f"{gpu!r} is not a SkyPilot accelerator", "give NAME or NAME:COUNT, e.g. L4:1"
        )
    check.port("--port", port)
    check.one_of("--engine", engine, ("torch", "vllm"))
    if source is not None and not source.is_dir():
        raise CLIError("--source", f"no folder {source}", "give a checkout of ART, or leave it out")
    check.folder_or_new("--path", path)

    config = LaunchConfig(
        cluster=cluster,
        gpu=gpu,
        port=port,
        engine=engine,
        infra=infra,
        source=source or default_source(),
        path=path,
    )
    files = write_launch(config)
    echo(instructions(config, files))
    if run:
        echo(f"launching {cluster} with SkyPilot...")
        launch(config, files)


def run_remote_demo(config: DemoConfig, url: str, api_key: str | None, *, echo: Echo) -> None:
    """`art demo --remote URL`: the demo, trained by the `art serve` at `url`."""
    from art.backends.remote import RemoteBackend
    from art.examples.tic_tac_toe.train import run_demo

    async def main() -> None:
        async with RemoteBackend(url, api_key) as backend:
            echo(f"training on art serve at {backend.url}")
            await run_demo(config, backend=backend, echo=echo)

    asyncio.run(main())
