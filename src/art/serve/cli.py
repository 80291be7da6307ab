"""The logic behind `art serve`, `art launch` and `art demo --remote` (`art/cli.py` only wraps these)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from pydantic import ValidationError

from ..types import RuntimeOptions

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
    """`art serve`: validate the options (a bad one exits 2 with the reason), then serve until stopped."""
    from ..gpu_pricing import check_gpu_cost_per_hour_usd
    from .app import ServeConfig, ServeError, run

    try:
        options = RuntimeOptions(device=device, engine=engine).with_env_overrides()
    except (ValidationError, ValueError) as e:
        raise typer.BadParameter(str(e), param_hint="--device/--engine") from None
    if max_body_mib < 1:
        raise typer.BadParameter("must be at least 1", param_hint="--max-body-mib")
    try:
        gpu_cost = check_gpu_cost_per_hour_usd(gpu_cost_per_hour_usd)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--gpu-cost-per-hour-usd") from None
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
    except ServeError as e:
        echo(f"art serve: {e}")
        raise typer.Exit(2) from None


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
    """`art launch`: write the SkyPilot task and print how to start it and connect (with --run, start it)."""
    from .launch import LaunchConfig, default_source, instructions, launch, write_launch

    config = LaunchConfig(
        cluster=cluster,
        gpu=gpu,
        port=port,
        engine=engine,
        infra=infra,
        source=source or default_source(),
        path=path,
    )
    try:
        files = write_launch(config)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    echo(instructions(config, files))
    if run:
        echo(f"launching {cluster} with SkyPilot...")
        launch(config, files)


def run_remote_demo(config: DemoConfig, url: str, api_key: str | None, *, echo: Echo) -> None:
    """`art demo --remote URL`: the demo, trained by the `art serve` at `url`."""
    from art.examples.tic_tac_toe.train import run_demo

    from ..backends.remote import RemoteBackend

    async def main() -> None:
        async with RemoteBackend(url, api_key) as backend:
            echo(f"training on art serve at {backend.url}")
            await run_demo(config, backend=backend, echo=echo)

    asyncio.run(main())
