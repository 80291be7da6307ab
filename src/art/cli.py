"""The `art` command: `art demo` trains an agent on the embedded default model; `art plot` draws history.

Also reachable as `python -m art ...`.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(
    help="ART, the Agent Reinforcement Trainer: improve an LLM agent from its own experience.",
    no_args_is_help=True,
    add_completion=False,
)


@app.command()
def demo(
    steps: Annotated[int | None, typer.Option(help="Training steps (default 8; 2 with --quick).")] = None,
    group_size: Annotated[int | None, typer.Option(help="Games per training scenario (default 8).")] = None,
    quick: Annotated[bool, typer.Option("--quick", help="A two-minute smoke run.")] = False,
    model: Annotated[
        str, typer.Option(help="Base model: a short name, a Hugging Face id or a local folder.")
    ] = "smollm2-135m",
    learning_rate: Annotated[float | None, typer.Option(help="AdamW learning rate.")] = None,
    val_games: Annotated[int | None, typer.Option(help="Held-out games per evaluation.")] = None,
    name: Annotated[
        str, typer.Option(help="Name of the trained model (its folder under .art/).")
    ] = "tic-tac-toe",
    base_path: Annotated[str, typer.Option(help="Where the record is kept.")] = ".art",
    seed: Annotated[int, typer.Option(help="Seed of the training games.")] = 0,
    remote: Annotated[
        str | None,
        typer.Option(help="Train on a running `art serve` at this URL instead of in this process."),
    ] = None,
    api_key: Annotated[
        str | None, typer.Option(envvar="ART_API_KEY", help="The --remote server's key.", show_default=False)
    ] = None,
) -> None:
    """Train the default model (SmolLM2-135M) to play tic-tac-toe against a random opponent, on this machine.

    Prints a line per step, writes history.jsonl and a PNG plot, and ends with base vs trained on the
    same held-out games. A run continues from the newest checkpoint of a model with the same name.
    """
    from art.examples.tic_tac_toe.train import DemoConfig, run_demo

    overrides: dict[str, object] = {"base_model": model, "name": name, "base_path": base_path, "seed": seed}
    for key, value in (
        ("steps", steps),
        ("group_size", group_size),
        ("learning_rate", learning_rate),
        ("val_games", val_games),
    ):
        if value is not None:
            overrides[key] = value
    config = DemoConfig.quick(**overrides) if quick else DemoConfig(**overrides)
    if remote is None:
        asyncio.run(run_demo(config, echo=typer.echo))
    else:
        from art.serve.cli import run_remote_demo

        run_remote_demo(config, remote, api_key, echo=typer.echo)


@app.command()
def plot(
    model_dir: Annotated[Path, typer.Argument(help="A model's folder, e.g. .art/demo/models/tic-tac-toe")],
    metrics: Annotated[
        list[str] | None, typer.Option("--metric", help="Metric to draw (repeatable).")
    ] = None,
    out: Annotated[
        Path | None, typer.Option(help="PNG path (default: <model_dir>/plots/history.png).")
    ] = None,
) -> None:
    """Plot metrics of a model's history.jsonl per step."""
    from art.plotting import plot_history

    history_path = model_dir / "history.jsonl"
    if not history_path.exists():
        raise typer.BadParameter(
            f"{history_path} does not exist; pass a model folder under .art/", param_hint="MODEL_DIR"
        )
    history = [json.loads(line) for line in history_path.read_text().splitlines() if line.strip()]
    path = plot_history(
        history, out or model_dir / "plots" / "history.png", metrics or ("train/reward", "val/reward")
    )
    typer.echo(str(path))


@app.command()
def serve(
    host: Annotated[
        str, typer.Option(help="Interface to bind; anything but loopback needs a key.")
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option(help="Port of the OpenAI routes and the /v1/art/ training API.")
    ] = 7999,
    path: Annotated[Path, typer.Option(help="Where models, checkpoints and jobs are kept.")] = Path(".art"),
    api_key_file: Annotated[
        Path | None, typer.Option(help="The key file (default PATH/.serve/api_key; made at the first start).")
    ] = None,
    no_api_key: Annotated[
        bool, typer.Option("--no-api-key", help="Serve without a key (loopback only).")
    ] = False,
    device: Annotated[str, typer.Option(help="auto, cpu, cuda or cuda:N.")] = "auto",
    engine: Annotated[str, typer.Option(help="torch (built in) or vllm.")] = "torch",
    max_body_mib: Annotated[int, typer.Option(help="Largest request body accepted, in MiB.")] = 256,
) -> None:
    """Serve trainable models for RemoteBackend clients: one process, one port, every model (docs/remote.md)."""
    from art.serve.cli import serve_command

    serve_command(host, port, path, api_key_file, no_api_key, device, engine, max_body_mib, echo=typer.echo)


@app.command()
def launch(
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
) -> None:
    """Write a SkyPilot task that runs `art serve` on a cloud GPU (and with --run, start it)."""
    from art.serve.cli import launch_command

    launch_command(cluster, gpu, port, engine, infra, source, path, run, echo=typer.echo)


def main() -> None:
    """Entry point of the `art` console script."""
    app()


if __name__ == "__main__":
    main()
