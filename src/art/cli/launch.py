"""`art launch`: a SkyPilot task that runs `art serve` on a cloud GPU, or on a Ray cluster of several
machines with --nodes (with --run, started).

Every option is checked first (`art.cli.checks`: one line, exit 2), then the task is written.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, get_args

import typer

from art.cli import checks as check
from art.cli.checks import CLIError
from art.types import EngineName, TrainSharding

NAME = "launch"
GUIDE: tuple[tuple[str, str], ...] = ()
"""Its lines in `art help` (usage, what it does); none: listed only by `art --help`."""


def command(
    cluster: Annotated[str, typer.Option(help="SkyPilot cluster name.")] = "art",
    gpu: Annotated[str, typer.Option(help="SkyPilot accelerators, e.g. L4:1, A100:1.")] = "L4:1",
    port: Annotated[int, typer.Option(help="Port `art serve` listens on (opened by SkyPilot).")] = 7999,
    engine: Annotated[str, typer.Option(help="torch or vllm.")] = "torch",
    infra: Annotated[str | None, typer.Option(help="SkyPilot infra, e.g. aws or gcp/us-central1.")] = None,
    source: Annotated[
        Path | None,
        typer.Option(help="A checkout of ART to sync and install (default: this one, else PyPI)."),
    ] = None,
    path: Annotated[Path, typer.Option(help="Where the task file, key and record go.")] = Path(".art"),
    run: Annotated[bool, typer.Option("--run", help="Also start it with SkyPilot.")] = False,
    nodes: Annotated[
        int, typer.Option(help="Machines; more than 1 runs a Ray cluster across them (docs/scale.md).")
    ] = 1,
    inference_replicas: Annotated[int, typer.Option(help="Inference engines (with --nodes > 1).")] = 1,
    train_ranks: Annotated[int, typer.Option(help="Trainer ranks (with --nodes > 1).")] = 1,
    train_sharding: Annotated[
        str, typer.Option(help="ddp, or fsdp2 for a base too big for one GPU (docs/scale.md).")
    ] = "ddp",
    bucket: Annotated[
        str | None,
        typer.Option(
            help="SkyPilot storage bucket for the record, read by every node (needed for --nodes > 1)."
        ),
    ] = None,
) -> None:
    """Write a SkyPilot task that runs `art serve` on a cloud GPU (and with --run, start it)."""
    launch_command(
        cluster,
        gpu,
        port,
        engine,
        infra,
        source,
        path,
        run,
        echo=typer.echo,
        scale=Cluster(nodes, inference_replicas, train_ranks, bucket, train_sharding),
    )


@dataclass(frozen=True)
class Cluster:
    """`art launch`'s multi-node options: --nodes, --inference-replicas, --train-ranks, --bucket."""

    nodes: int = 1
    inference_replicas: int = 1
    train_ranks: int = 1
    bucket: str | None = None
    train_sharding: str = "ddp"

    def check(self) -> None:
        """CLIError naming the flag for a layout that cannot run."""
        for flag, value in (
            ("--nodes", self.nodes),
            ("--inference-replicas", self.inference_replicas),
            ("--train-ranks", self.train_ranks),
        ):
            if value < 1:
                raise CLIError(flag, f"{value} is not a count", "give 1 or more")
        if self.nodes == 1 and (self.inference_replicas > 1 or self.train_ranks > 1):
            raise CLIError(
                "--nodes", "replicas and ranks across machines need a cluster", "give --nodes 2 or more"
            )
        check.one_of("--train-sharding", self.train_sharding, get_args(TrainSharding))
        if self.nodes > 1 and not self.bucket:
            raise CLIError(
                "--bucket",
                f"--nodes {self.nodes} needs storage every node reads (the checkpoints)",
                "give --bucket NAME (a SkyPilot storage bucket, mounted at /art on every node)",
            )
        if self.bucket is not None and not re.fullmatch(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", self.bucket):
            raise CLIError("--bucket", f"{self.bucket!r} is not a bucket name", "3-63 of a-z, 0-9, '.', '-'")


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
    echo: Callable[[str], None],
    scale: Cluster | None = None,
) -> None:
    """`art launch`: check the options, write the SkyPilot task and print how to start it and connect (with
    --run, start it)."""
    from art.cluster.launch import LaunchConfig, default_source, instructions, launch, write_launch

    check.record_name("--cluster", cluster)
    if not re.fullmatch(r"[A-Za-z0-9_-]+(:\d+)?", gpu):
        raise CLIError(
            "--gpu", f"{gpu!r} is not a SkyPilot accelerator", "give NAME or NAME:COUNT, e.g. L4:1"
        )
    check.port("--port", port)
    check.one_of("--engine", engine, get_args(EngineName))
    if source is not None and not source.is_dir():
        raise CLIError("--source", f"no folder {source}", "give a checkout of ART, or leave it out")
    check.folder_or_new("--path", path)
    scale = scale or Cluster()
    scale.check()

    config = LaunchConfig(
        cluster=cluster,
        gpu=gpu,
        port=port,
        engine=engine,
        infra=infra,
        source=source or default_source(),
        path=path,
        nodes=scale.nodes,
        inference_replicas=scale.inference_replicas,
        train_ranks=scale.train_ranks,
        record_bucket=scale.bucket,
        train_sharding=scale.train_sharding,
    )
    files = write_launch(config)
    echo(instructions(config, files))
    if run:
        echo(f"launching {cluster} with SkyPilot...")
        launch(config, files)
