"""`art serve`: every model of a folder served on one port, for `RemoteBackend` clients, and base models to
chat with (`--model NAME`) for any OpenAI client (docs/remote.md).

Every option is checked first (`art.cli.checks`: one line, exit 2), then the server starts."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, get_args

import typer
from pydantic import ValidationError

from art.cli import checks as check
from art.cli.checks import CLIError
from art.types import EngineName, RuntimeOptions

Echo = Callable[[str], None]

NAME = "serve"
GUIDE: tuple[tuple[str, str], ...] = (
    ("art serve", "serve models for training from another machine (RemoteBackend)"),
    ("art serve --model NAME", "chat with a base model (OpenAI client), no training"),
)
"""Its lines in `art help` (usage, what it does); none: listed only by `art --help`."""


def command(
    host: Annotated[
        str, typer.Option(help="Interface to bind; anything but loopback needs a key.")
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option(help="Port of the OpenAI routes and the /v1/art/ training API.")
    ] = 7999,
    path: Annotated[Path, typer.Option(help="Where models, checkpoints and jobs are kept.")] = Path(".art"),
    model: Annotated[
        list[str] | None,
        typer.Option(
            "--model",
            "--base-model",
            metavar="<name>",
            help="A base model to chat with, served at start under the name given: a short name such as "
            "smollm2-135m, a Hugging Face id or a local folder (repeat for more). OpenAI clients chat with it "
            "by that name at once; no training (for that, register a TrainableModel through RemoteBackend).",
            show_default=False,
        ),
    ] = None,
    api_key_file: Annotated[
        Path | None, typer.Option(help="The key file (default PATH/.serve/api_key; made at the first start).")
    ] = None,
    no_api_key: Annotated[
        bool, typer.Option("--no-api-key", help="Serve without a key (loopback only).")
    ] = False,
    device: Annotated[str, typer.Option(help="auto, cpu, cuda or cuda:N.")] = "auto",
    engine: Annotated[str, typer.Option(help="torch (built in) or vllm.")] = "torch",
    max_body_mib: Annotated[int, typer.Option(help="Largest request body accepted, in MiB.")] = 256,
    gpu_cost_per_hour_usd: Annotated[
        float | None,
        typer.Option(
            help="Hourly USD price of one GPU (on a CPU: of the machine), for each step's costs/gpu."
        ),
    ] = None,
    base_model_root: Annotated[
        list[Path] | None,
        typer.Option(
            envvar="ART_BASE_MODEL_ROOTS",
            help="A folder clients may load base models from by path (repeat for more; Hugging Face ids and "
            "short names need none).",
            show_default=False,
        ),
    ] = None,
    ray_address: Annotated[
        str | None,
        typer.Option(
            help="A Ray cluster (host:port) to run inference replicas and trainer ranks on (docs/scale.md)."
        ),
    ] = None,
    inference_replicas: Annotated[
        int,
        typer.Option(help="Inference engines behind the one endpoint (Ray actors, or vLLM data parallel)."),
    ] = 1,
    train_ranks: Annotated[
        int, typer.Option(help="torch.distributed ranks that train each step (gloo on CPUs, NCCL on GPUs).")
    ] = 1,
    train_sharding: Annotated[
        str,
        typer.Option(
            help="How the ranks share the model: ddp (each holds the whole base) or fsdp2 (sharded; for a base "
            "too big for one device)."
        ),
    ] = "ddp",
    max_rejected_checkpoints: Annotated[
        int,
        typer.Option(
            help="Set-aside checkpoints (failed or corrupted steps) kept per model under checkpoints/rejected/; "
            "the oldest beyond this are deleted (0 keeps none)."
        ),
    ] = RuntimeOptions.model_fields["max_rejected_checkpoints"].default,
    tinker_model: Annotated[
        list[str] | None,
        typer.Option(
            "--tinker-model",
            metavar="<name>=<model>",
            help="Serve base model <model> (a short name, a Hugging Face id or a folder) to Tinker SDK clients "
            "under <name>, e.g. Qwen/Qwen3-4B-Instruct-2507=./my-model for recipes that know only registry "
            "names (repeat for more; docs/tinker.md).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Serve trainable models for RemoteBackend clients, and base models to chat with: one process, one port.

    `art serve --model smollm2-135m` serves that base model at start, so an OpenAI client (base_url
    http://127.0.0.1:7999/v1, the key in PATH/.serve/api_key) chats with it as model="smollm2-135m" right
    away. Trainable models are registered by clients (RemoteBackend) and served as NAME and NAME@STEP.
    A chat for a model the server does not serve gets a 404 listing what it serves (docs/remote.md).
    """
    serve_command(
        host, port, path, api_key_file, no_api_key, device, engine, max_body_mib, gpu_cost_per_hour_usd,
        base_model_root, scale=ScaleOut(ray_address, inference_replicas, train_ranks, train_sharding), echo=typer.echo,
        max_rejected_checkpoints=max_rejected_checkpoints, chat_models=model, tinker_models=tinker_model,
    )  # fmt: skip


def tinker_aliases(given: list[str]) -> tuple[tuple[str, str], ...]:
    """`--tinker-model NAME=MODEL` values as (name, model) pairs; CLIError for one without `=`."""
    pairs = []
    for item in given:
        name, sep, source = item.partition("=")
        if not sep or not name.strip() or not source.strip():
            raise CLIError(
                "--tinker-model", f"{item!r} is not NAME=MODEL", "e.g. Qwen/Qwen3-4B-Instruct-2507=./my-model"
            )
        check.base_model("--tinker-model", source.strip())
        pairs.append((name.strip(), source.strip()))
    return tuple(pairs)


@dataclass(frozen=True)
class ScaleOut:
    """`art serve`'s scale-out flags: --ray-address, --inference-replicas, --train-ranks, --train-sharding
    (docs/scale.md)."""

    ray_address: str | None = None
    inference_replicas: int = 1
    train_ranks: int = 1
    train_sharding: str = "ddp"

    def options(self) -> dict[str, object]:
        """The `RuntimeOptions` fields they set."""
        return {
            "ray_address": self.ray_address,
            "inference_replicas": self.inference_replicas,
            "train_ranks": self.train_ranks,
            "train_sharding": self.train_sharding,
        }

    def check(self) -> None:
        """CLIError (one line, exit 2) for a count below 1 or a Ray address that does not answer."""
        check.at_least("--inference-replicas", self.inference_replicas, 1, "inference engines")
        check.at_least("--train-ranks", self.train_ranks, 1, "trainer ranks")
        check.one_of("--train-sharding", self.train_sharding, ("ddp", "fsdp2"))
        if self.ray_address is None:
            return
        from art.cluster.ray_cluster import RayClusterError, check_address, host_port, require_ray

        try:
            require_ray()
            host_port(self.ray_address)
            check_address(self.ray_address)
        except (RayClusterError, ValueError) as e:
            problem, _, fix = str(e).partition("; ")
            raise CLIError("--ray-address", problem, fix or "start the cluster first") from None


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
    scale: ScaleOut | None = None,
    echo: Echo,
    max_rejected_checkpoints: int | None = None,
    chat_models: list[str] | None = None,
    tinker_models: list[str] | None = None,
) -> None:
    """`art serve`: check every option (a bad one is CLIError: one line, exit 2), then serve until stopped.
    `chat_models`: base models to serve at start for chat only, by the names given (`--model`)."""
    from art.hub.app import ServeConfig, ServeError, run
    from art.metrics.gpu import check_gpu_cost_per_hour_usd

    check.port("--port", port, any_free=True)
    check.one_of("--engine", engine, get_args(EngineName))
    if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", device):
        raise CLIError("--device", f"{device!r} is not a device", "give auto, cpu, cuda or cuda:N")
    scale = scale or ScaleOut()
    scale.check()
    check.at_least("--max-rejected-checkpoints", max_rejected_checkpoints, 0, "set-aside checkpoints kept")
    kept = {} if max_rejected_checkpoints is None else {"max_rejected_checkpoints": max_rejected_checkpoints}
    try:
        options = RuntimeOptions(device=device, engine=engine, **scale.options(), **kept).with_env_overrides()
    except ValidationError as e:  # ART_DEVICE / ART_ENGINE in the environment override the flags
        raise check.from_validation_error(
            e,
            {
                "device": "--device (or ART_DEVICE)",
                "engine": "--engine (or ART_ENGINE)",
                "inference_replicas": "--inference-replicas",
                "train_ranks": "--train-ranks",
                "train_sharding": "--train-sharding",
                "ray_address": "--ray-address",
            },
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
    for name in chat_models or ():
        check.base_model("--model", name)  # loaded by this server: there to load here
    aliases = tinker_aliases(tinker_models or [])
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
        chat_models=tuple(dict.fromkeys(chat_models or ())),
        tinker_models=aliases,
    )
    try:
        run(config, echo=echo)
    except ServeError as e:  # the key file or the address, refused before any model loads
        problem, _, fix = str(e).partition("; ")
        raise CLIError(e.flag, problem, fix) from None
