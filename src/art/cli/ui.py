"""`art ui [PATH]`: a local, read-only web page over a record (docs/ui.md), and `spawn` for tests and benchmarks."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from art.cli.checks import CLIError
from art.cli.checks import port as check_port

Echo = Callable[[str], None]

NAME = "ui"
GUIDE: tuple[tuple[str, str], ...] = (
    ("art ui [PATH]", "a local page over the record: charts, groups, tokens by advantage"),
)
"""Its lines in `art help` (usage, what it does); none: listed only by `art --help`."""


def command(
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

    check_port("--port", port, any_free=True)
    problem = check_path(path)
    if problem is not None:
        raise CLIError(*problem)
    if importlib.util.find_spec("fastapi") is None or importlib.util.find_spec("uvicorn") is None:
        raise CLIError("", "the page needs FastAPI and uvicorn", 'pip install -e ".[ui]"')
    problem = check_bind(host, port)  # imports art.hub.app (FastAPI), present now
    if problem is not None:
        raise CLIError(*problem)
    try:
        ui_command(path, host, port, echo=typer.echo)
    except OSError as exc:
        raise CLIError(
            "--port", f"cannot serve on {host}:{port}: {exc.strerror or exc}", "pass another --port"
        ) from None


def check_bind(host: str, port: int) -> tuple[str, str, str] | None:
    """Why `host:port` cannot be used by `art ui` as (flag, problem, fix), None when it can: a port out of
    range, or a host that is not loopback (the UI has no key of its own; `art serve` mounts it under /ui
    behind its key)."""
    try:
        check_port("--port", port, any_free=True)
    except CLIError as exc:
        return (exc.where, exc.problem, exc.fix)
    if not host.strip():
        return ("--host", "the host is empty", "give 127.0.0.1 (the default) or localhost")
    from art.hub.app import is_loopback

    if not is_loopback(host):
        return (
            "--host",
            f"{host} is not this machine: `art ui` serves only loopback because it has no key",
            "to reach a record from elsewhere, run `art serve` there (its key protects /ui) or forward the "
            "port over ssh",
        )
    return None


def check_path(path: Path) -> tuple[str, str, str] | None:
    """Why `path` cannot be a record for `art ui` as (argument, problem, fix), None when it can: it does not
    exist, or it is a file. A folder that holds no record yet is served: the page says so, and shows the
    models as a run writes them (docs/ui.md)."""
    if not path.exists():
        return ("PATH", f"{path} does not exist", "pass the folder your runs record into (.art by default)")
    if not path.is_dir():
        return (
            "PATH",
            f"{path} is a file, not a record",
            "pass the folder your runs record into (.art by default)",
        )
    return None


def ui_command(path: Path, host: str, port: int, *, echo: Echo) -> None:
    """Serve the UI over `path` until interrupted; prints where to open it."""
    import uvicorn

    from art.openai_server.http import bind_socket, http_url
    from art.ui.app import create_app

    app = create_app(path)
    sock = bind_socket(host, port)
    url = http_url(host, sock.getsockname()[1])
    _, problems = app.state.reader.models()
    echo(f"art ui: reading {path.resolve()} (read-only) at {url}/")
    for problem in problems:
        echo(f"  note: {problem}")
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    server.run(sockets=[sock])


def spawn(path: Path, log: Path, *, timeout: float = 60.0) -> tuple[subprocess.Popen[bytes], str]:
    """Start `python -m art ui PATH --port 0` in a subprocess (output to `log`) and wait for its URL.

    Raises RuntimeError with the log when it exits or says nothing within `timeout` seconds. The caller
    stops it (`proc.terminate()`). Used by the browser tests and `benchmarks/bench_ui.py`.
    """
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "art", "ui", str(path), "--port", "0"],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + timeout
    while not (found := re.search(r"at (http://127\.0\.0\.1:\d+)/", log.read_text(errors="replace"))):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"art ui did not start:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.1)
    return proc, found.group(1)
