"""The `art` command: its root (`art`, `art --version`, `art help`), the registry of its commands, `main`.

One module per command, all of one shape: `art.cli.<module>` defines `NAME` (the command's name),
`command` (the typer function: its options and docstring are the command's help; it checks every option
first with `art.cli.checks`, then imports and runs what it needs) and `GUIDE` (its lines in `art help`).
`COMMANDS` below is the one place that lists them, in the order `art --help` shows them; a new command is
a new module added there. Command modules import nothing heavy at the top, so `art --help` stays fast.

Also reachable as `python -m art ...`. A user's mistake (a bad option, a missing folder, an unknown metric)
is one line on stderr, `art <command>: <--flag>: <what is wrong>; <what to do>`, with exit code 2; never a
traceback (set ART_DEBUG=1 to see one for a failure that is not the user's). Help is click's plain layout:
sentences wrap whole and flags show as flags.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from art.cli import autorl, demo, init, install_skills, launch, plot, serve, sft, show, ui
from art.cli.checks import CLIError, UsageError
from art.common.env import read as read_env

COMMANDS = (demo, plot, autorl, sft, serve, launch, ui, show, install_skills, init)
"""Every command of `art` (besides `help`), in the order `art --help` lists them."""

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


for _module in COMMANDS:
    app.command(_module.NAME)(_module.command)


def _guide_line(usage: str, what: str) -> str:
    pad = " " * (2 + max(2, 22 - len(usage)))
    return "  " + usage + pad[2:] + what.replace("\n", "\n" + " " * 24)


@app.command("help")
def help_command() -> None:
    """How to get started: the demo, the docs, and the skills for coding assistants."""
    guide = [line for module in COMMANDS for line in module.GUIDE] + [("art --help", "every command")]
    typer.echo(
        "ART, the Agent Reinforcement Trainer: improve an LLM agent from its own experience.\n\n"
        + "\n".join(_guide_line(usage, what) for usage, what in guide)
        + "\n\nDocs: README.md and docs/ in the repository (examples/quickstart.py is a complete example)."
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
        # click's `human_readable_name`; typer >= 0.2x's own click has none: its metavar, else NAME
        flag = getattr(param, "human_readable_name", None) or (param.metavar or param.name or "").upper()
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
        elif problem.startswith("Got unexpected extra argument"):  # "... argument(s) (a b)"
            extra = problem[problem.rfind(" (") + 2 : -1].split()
            flag = extra[0] if extra else None
            problem = "unexpected argument" + (f" (and {len(extra) - 1} more)" if len(extra) > 1 else "")
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
        if read_env("ART_DEBUG"):
            raise
        typer.echo(f"art: {type(exc).__name__}: {exc} (set ART_DEBUG=1 to see the traceback)", err=True)
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
