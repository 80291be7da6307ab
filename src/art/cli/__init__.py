"""The `art` command: `art demo` trains an agent on the embedded default model; `art plot` draws history;
`art sft FILE` fine-tunes a model on a JSONL file of conversations; `art ui` and `art show` read a record; `art init` installs the skills that
teach coding assistants to write training scripts; `art serve`/`art launch` run the service elsewhere.

Also reachable as `python -m art ...`; `art --version` prints the version; `art` alone prints the help.
Every command checks all its arguments before it loads anything (`art.cli_checks`): a user's mistake (a bad
option, a missing folder, an unknown metric) is one line on stderr,
`art <command>: <--flag>: <what is wrong>; <what to do>`, with exit code 2; never a traceback (set
ART_DEBUG=1 to see one for a failure that is not the user's). Help is click's plain layout: sentences wrap
whole and flags show as flags.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from art.cli import checks as check
from art.cli.checks import CLIError, UsageError

app = typer.Typer(
    help="ART, the Agent Reinforcement Trainer: improve an LLM agent from its own experience.",
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("agent-reinforcement-trainer")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"art {_version()}")
        raise typer.Exit(0)


@app.callback(invoke_without_command=True)
def _root(
    ctx: typer.Context,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_show_version, is_eager=True, help="Print ART's version and exit."
        ),
    ] = False,
) -> None:
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())
        raise typer.Exit(0)


@app.command()
def demo(
    steps: Annotated[
        int | None,
        typer.Option(
            help="Training steps (default 8; 2 with --quick; with --sft-warmup, as many as the budget allows).",
            show_default=False,
        ),
    ] = None,
    group_size: Annotated[int | None, typer.Option(help="Games per training scenario (default 8).")] = None,
    quick: Annotated[bool, typer.Option("--quick", help="A two-minute smoke run.")] = False,
    model: Annotated[
        str, typer.Option(help="Base model: a short name, a Hugging Face id or a local folder.")
    ] = "smollm2-135m",
    learning_rate: Annotated[
        float | None,
        typer.Option(
            help="RL's AdamW learning rate (default 1.5e-4; 5e-5 with --sft-warmup).", show_default=False
        ),
    ] = None,
    val_games: Annotated[int | None, typer.Option(help="Held-out games per evaluation.")] = None,
    name: Annotated[
        str | None,
        typer.Option(help="Name of the trained model (its folder under .art/; default tic-tac-toe[-sft])."),
    ] = None,
    base_path: Annotated[str, typer.Option(help="Where the record is kept.")] = ".art",
    seed: Annotated[int, typer.Option(help="Seed of the training games.")] = 0,
    sft_warmup: Annotated[
        bool, typer.Option("--sft-warmup", help="First fine-tune on a perfect teacher's games, then RL.")
    ] = False,
    time_budget_minutes: Annotated[
        float | None,
        typer.Option(
            help="Minutes of training (held-out games not counted) to stay within; with --steps 1000, RL "
            "runs until the budget is spent (--sft-warmup runs so, with 30; 0: no budget).",
            show_default=False,
        ),
    ] = None,
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
    With --sft-warmup, step 1 first fine-tunes on games of a perfect minimax teacher (supervised), then RL
    continues on the same adapter at a lower learning rate (5e-5) until 30 minutes of training are spent:
    the recipe that reached 86-92% held-out wins with under 5% illegal moves for 3 of 3 seeds on a 2-core
    CPU (benchmarks/README.md).
    """
    check.at_least("--steps", steps, 1, "training steps")
    check.at_least("--group-size", group_size, 2, "a group (GRPO compares games of the same scenario)")
    check.positive("--learning-rate", learning_rate, "a learning rate", "1.5e-4")
    check.at_least("--val-games", val_games, 0, "held-out games")
    check.at_least("--time-budget-minutes", time_budget_minutes, 0, "a time budget")
    check.base_model("--model", model)
    if name is not None:
        check.record_name("--name", name)
    check.folder_or_new("--base-path", base_path)
    if remote is not None and not remote.startswith(("http://", "https://")):
        raise CLIError(
            "--remote", f"{remote!r} is not a URL", "give the `art serve` address, e.g. http://gpu-box:7999"
        )
    from art.examples.tic_tac_toe.train import demo_config, run_demo

    overrides: dict[str, object] = {"base_model": model, "base_path": base_path, "seed": seed}
    if name is not None:
        overrides["name"] = name
    for key, value in (
        ("steps", steps),
        ("group_size", group_size),
        ("learning_rate", learning_rate),
        ("val_games", val_games),
        ("time_budget_minutes", time_budget_minutes),
    ):
        if value is not None:
            overrides[key] = value
    config = demo_config(quick=quick, sft_warmup=sft_warmup, **overrides)
    if remote is None:
        asyncio.run(run_demo(config, echo=typer.echo))
    else:
        from art.cli.serve import run_remote_demo

        run_remote_demo(config, remote, api_key, echo=typer.echo)


@app.command()
def plot(
    model_dir: Annotated[
        Path, typer.Argument(help="A model's folder, e.g. .art/demo/models/tic-tac-toe.", show_default=False)
    ],
    metrics: Annotated[
        list[str] | None,
        typer.Option(
            "--metric",
            help="A metric to draw (repeatable). Default: the reward and win rate per step, as `art demo` draws.",
            show_default=False,
        ),
    ] = None,
    out: Annotated[
        Path | None, typer.Option(help="Where to write the PNG (default: MODEL_DIR/plots/history.png).")
    ] = None,
) -> None:
    """Plot a model's history per step.

    Draws the metrics of MODEL_DIR/history.jsonl (what training and `model.log` recorded) as a PNG and
    prints its path.
    """
    from art.record.plots import plot_history
    from art.record.storage import read_history_file

    history_path = model_dir / "history.jsonl"
    if not history_path.is_file():
        found = sorted(str(p.parent) for p in Path(".art").glob("*/models/*/history.jsonl"))
        hint = (
            f"models with a history here: {', '.join(found)}"
            if found
            else "no model has a history under ./.art"
        )
        raise CLIError("MODEL_DIR", f"no history.jsonl in {model_dir}", f"pass a model's folder ({hint})")
    if out is not None and out.is_dir():
        raise CLIError("--out", f"{out} is a folder", "give the PNG file's path, e.g. plots/history.png")
    history = read_history_file(history_path)
    try:
        path = plot_history(
            history, out or model_dir / "plots" / "history.png", metrics or None, title=model_dir.name
        )
    except ValueError as exc:
        problem, _, fix = str(exc).partition("; ")
        raise CLIError("--metric" if metrics else "MODEL_DIR", f"{history_path}: {problem}", fix) from None
    typer.echo(str(path))


@app.command()
def autorl(
    task: Annotated[str, typer.Argument(help="What the model should learn, in plain English.")],
    base_model: Annotated[
        str, typer.Option(help="Base model: a short name, a Hugging Face id or a folder.")
    ] = "smollm2-135m",
    generator: Annotated[
        str | None,
        typer.Option(
            envvar="ART_GENERATOR",
            help="LLM that writes the inputs: a LiteLLM model string, a model name at --generator-base-url, or 'self'.",
        ),
    ] = None,
    generator_base_url: Annotated[
        str | None,
        typer.Option(envvar="ART_GENERATOR_BASE_URL", help="OpenAI-compatible endpoint of the generator."),
    ] = None,
    generator_api_key: Annotated[
        str | None, typer.Option(envvar="ART_GENERATOR_API_KEY", help="API key of the generator.")
    ] = None,
    judge: Annotated[
        str | None,
        typer.Option(
            envvar="ART_JUDGE",
            help="RULER judge: a LiteLLM model string, a model name at --judge-base-url, or 'self' (weak).",
        ),
    ] = None,
    judge_base_url: Annotated[
        str | None, typer.Option(envvar="ART_JUDGE_BASE_URL", help="OpenAI-compatible endpoint of the judge.")
    ] = None,
    judge_api_key: Annotated[
        str | None, typer.Option(envvar="ART_JUDGE_API_KEY", help="API key of the judge.")
    ] = None,
    num_train: Annotated[int | None, typer.Option(help="Training inputs to generate (default 16).")] = None,
    num_val: Annotated[int | None, typer.Option(help="Held-out inputs to generate (default 8).")] = None,
    steps: Annotated[int | None, typer.Option(help="Training steps (default 8).")] = None,
    groups_per_step: Annotated[int | None, typer.Option(help="Inputs per step (default 2).")] = None,
    rollouts_per_group: Annotated[
        int | None, typer.Option(help="Answers per input for RULER to compare (default 4).")
    ] = None,
    learning_rate: Annotated[float | None, typer.Option(help="AdamW learning rate (default 1e-4).")] = None,
    max_tokens: Annotated[int | None, typer.Option(help="Tokens per answer (default 256).")] = None,
    name: Annotated[str, typer.Option(help="Name of the trained model (its folder under .art/).")] = "autorl",
    project: Annotated[str, typer.Option(help="Project folder under --base-path.")] = "autorl",
    base_path: Annotated[str, typer.Option(help="Where the record is kept.")] = ".art",
    seed: Annotated[int, typer.Option(help="Seed of the train/held-out split and the batches.")] = 0,
) -> None:
    """Train a model for any task from its description alone: an LLM writes inputs, RULER judges answers.

    Needs a generator and a judge (any LiteLLM model string, or any OpenAI-compatible server with
    --*-base-url); with none set it says what to set. Ends with trained vs base on held-out inputs, and
    writes history.jsonl and a PNG plot as `art demo` does. See docs/autorl.md.
    """
    from art.cli.autorl import run_autorl_command

    run_autorl_command(
        task,
        {
            "base_model": base_model, "generator": generator, "generator_base_url": generator_base_url,
            "generator_api_key": generator_api_key, "judge": judge, "judge_base_url": judge_base_url,
            "judge_api_key": judge_api_key, "num_training_inputs": num_train, "num_test_inputs": num_val,
            "steps": steps, "groups_per_step": groups_per_step, "rollouts_per_group": rollouts_per_group,
            "learning_rate": learning_rate, "max_tokens": max_tokens, "name": name, "project": project,
            "base_path": base_path, "seed": seed,
        },
    )  # fmt: skip


@app.command()
def sft(
    file: Annotated[
        Path, typer.Argument(help='JSONL file: one {"messages": [...], "tools": [...]} per line.')
    ],
    model: Annotated[str, typer.Option(help="Name of the model to train (its folder under .art/).")],
    base_model: Annotated[
        str, typer.Option(help="Base model: a short name, a Hugging Face id or a local folder.")
    ] = "smollm2-135m",
    project: Annotated[str, typer.Option(help="Project of the model.")] = "sft",
    base_path: Annotated[str, typer.Option(help="Where the record is kept.")] = ".art",
    epochs: Annotated[int, typer.Option(help="Passes over the file.")] = 1,
    batch_size: Annotated[int, typer.Option(help="Conversations per optimiser step.")] = 2,
    peak_lr: Annotated[float, typer.Option(help="Peak learning rate.")] = 2e-4,
    schedule_type: Annotated[str, typer.Option(help="linear, cosine or constant.")] = "linear",
    warmup_ratio: Annotated[float, typer.Option(help="Fraction of the batches spent warming up.")] = 0.1,
    initial_step: Annotated[int, typer.Option(help="Batch to resume from.")] = 0,
    final_step: Annotated[int | None, typer.Option(help="Batch to stop before (default: the end).")] = None,
    shuffle_buffer_size: Annotated[int, typer.Option(help="Lines shuffled together in memory.")] = 10000,
    skip_invalid: Annotated[bool, typer.Option(help="Skip (and count) invalid lines.")] = False,
    seed: Annotated[int, typer.Option(help="Seed of the shuffle.")] = 42,
    verbose: Annotated[bool, typer.Option(help="Print each batch.")] = False,
) -> None:
    """Supervised fine-tuning from a JSONL file (the options of art.utils.sft.train_sft_from_file)."""
    from art.cli.sft import SFTCommand, main

    options = {k: v for k, v in locals().items() if k not in ("file", "SFTCommand", "main")}
    main(SFTCommand(file=str(file), **options), typer.echo)


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
) -> None:
    """Serve trainable models for RemoteBackend clients: one process, one port, every model (docs/remote.md)."""
    from art.cli.serve import serve_command

    serve_command(
        host, port, path, api_key_file, no_api_key, device, engine, max_body_mib, gpu_cost_per_hour_usd,
        base_model_root, echo=typer.echo,
    )  # fmt: skip


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
    from art.cli.serve import launch_command

    launch_command(cluster, gpu, port, engine, infra, source, path, run, echo=typer.echo)


@app.command()
def ui(
    path: Annotated[
        Path, typer.Argument(help="The record: a folder such as .art, a project's or a model's folder.")
    ] = Path(".art"),
    host: Annotated[
        str, typer.Option(help="Interface to bind (loopback only: the page has no key).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port of the page (0: any free port).")] = 7998,
) -> None:
    """Open a local, read-only web page over a record: charts by step, groups side by side, tokens coloured by
    advantage, checkpoints compared; it refreshes itself while a run trains (docs/ui.md)."""
    import importlib.util

    from art.cli.ui import check_bind, ui_command

    if importlib.util.find_spec("fastapi") is None or importlib.util.find_spec("uvicorn") is None:
        raise CLIError("", "the page needs FastAPI and uvicorn", 'pip install -e ".[ui]"')
    problem = check_bind(host, port)
    if problem is not None:
        raise CLIError(*problem)
    if not path.exists():
        raise CLIError(
            "PATH", f"{path} does not exist", "pass the folder your runs record into (.art by default)"
        )
    try:
        ui_command(path, host, port, echo=typer.echo)
    except OSError as exc:
        raise CLIError(
            "--port", f"cannot serve on {host}:{port}: {exc.strerror or exc}", "pass another --port"
        ) from None


@app.command()
def show(
    path: Annotated[
        Path, typer.Argument(help="A model's folder (or a record folder holding one model, or use --model).")
    ],
    step: Annotated[int, typer.Option(help="The step to show.")],
    split: Annotated[str, typer.Option(help="The split: train, val, ...")] = "train",
    group: Annotated[int, typer.Option(help="Which group of the step (0 first).")] = 0,
    model: Annotated[
        str | None, typer.Option(help="PROJECT/NAME, when PATH holds several models.", show_default=False)
    ] = None,
    tokens: Annotated[
        bool, typer.Option("--tokens", help="List every sampled token with its logprobs and ratio.")
    ] = False,
) -> None:
    """Print one group of a step: each trajectory's reward, advantage, judge explanation and chat, as trained."""
    from art.ui.show import ShowError
    from art.ui.show import show as show_group

    try:
        show_group(
            str(path), step, split=split, group=group, model=model, tokens=tokens, echo=typer.echo,
            warn=lambda m: typer.echo(m, err=True),
        )  # fmt: skip
    except ShowError as exc:
        raise CLIError("", str(exc)) from None


def _install_skills_into(path: Path) -> None:
    from art.skills import install_skills as install

    try:
        written = install(path)
    except (NotADirectoryError, PermissionError) as exc:
        problem, _, fix = str(exc).partition("; ")
        raise CLIError("PATH", problem, fix) from None
    typer.echo(f"Installed {len(written)} skill files into {path.resolve()}:")
    for file in written:
        typer.echo(f"  {file}")
    typer.echo("Use /train-rl and /train-sft in Claude Code or OpenAI Codex to write a training script.")


@app.command("install-skills")
def install_skills(
    path: Annotated[Path, typer.Argument(help="The project's folder.")] = Path("."),
) -> None:
    """Install ART's skills for AI coding assistants (.claude/skills/ and .agents/skills/)."""
    _install_skills_into(path)


@app.command()
def init(
    path: Annotated[Path, typer.Argument(help="The project's folder.")] = Path("."),
) -> None:
    """Set up a project for ART: installs the skills that teach coding assistants to write training scripts."""
    _install_skills_into(path)


@app.command("help")
def help_command() -> None:
    """How to get started: the demo, the docs, and the skills for coding assistants."""
    typer.echo(
        "ART, the Agent Reinforcement Trainer: improve an LLM agent from its own experience.\n\n"
        "  art demo              train the embedded SmolLM2-135M at tic-tac-toe on this machine\n"
        "  art init [PATH]       install skills so Claude Code or Codex can write training scripts\n"
        "                        (/train-rl, /train-sft)\n"
        "  art sft FILE ...      supervised fine-tuning from a JSONL file\n"
        "  art serve             serve models for training from another machine (RemoteBackend)\n"
        "  art ui [PATH]         a local page over the record: charts, groups, tokens by advantage\n"
        "  art show PATH --step N  one group of a step in the terminal, with advantages\n"
        "  art --help            every command\n\n"
        "Docs: README.md and docs/ in the repository (examples/quickstart.py is a complete example)."
    )


def _command_name(argv: list[str]) -> str:
    """The subcommand named in `argv` (for help hints), or "" for the root."""
    names = {c.name for c in typer.main.get_command(app).commands.values()}  # type: ignore[attr-defined]
    return next((a for a in argv if a in names), "")


def _usage_error(exc: Exception, command: str) -> CLIError:
    """Click's usage error in our one-line shape: the flag, what is wrong, where the help is."""
    help_hint = f"see `art {command + ' ' if command else ''}--help`"
    param = getattr(exc, "param", None)
    flag = getattr(exc, "option_name", None) or (
        max(param.opts, key=len) if param is not None and getattr(param, "opts", None) else None
    )
    if param is not None and getattr(param, "param_type_name", "") == "argument":
        flag = param.human_readable_name
    kind = type(exc).__name__
    if kind == "NoSuchOption":
        close = list(getattr(exc, "possibilities", None) or [])[:1]  # click's closest match first
        problem = "no such option" + (f" (did you mean {close[0]}?)" if close else "")
    elif kind == "MissingParameter":
        problem = "missing"
    elif kind == "BadParameter":
        problem = " ".join(str(getattr(exc, "message", exc)).split()).rstrip(".")
    else:
        problem = " ".join(exc.format_message().split()).rstrip(".")  # type: ignore[attr-defined]
        if problem.startswith("No such command"):
            flag, problem = problem.split("'")[1], "no such command"
    return CLIError(flag or "", problem[:1].lower() + problem[1:] if flag else problem, help_hint)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `art` console script: runs the command; user errors become one line, exit 2."""
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        code = app(args=args, prog_name="art", standalone_mode=False)
    except CLIError as exc:
        typer.echo(exc.line(_command_name(args)), err=True)
        sys.exit(2)
    except UsageError as exc:  # click's: bad or missing options and arguments, unknown commands
        command = _command_name(args)
        typer.echo(_usage_error(exc, command).line(command), err=True)
        sys.exit(2)
    except (typer.Abort, KeyboardInterrupt):
        typer.echo("art: interrupted", err=True)
        sys.exit(130)
    except Exception as exc:  # not the user's mistake: still one line, the traceback on request
        if os.environ.get("ART_DEBUG"):
            raise
        typer.echo(f"art: {type(exc).__name__}: {exc} (set ART_DEBUG=1 to see the traceback)", err=True)
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
