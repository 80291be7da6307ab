"""The logic behind `art ui` and `art show` (`art/cli.py` only declares their options)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

Echo = Callable[[str], None]


def check_bind(host: str, port: int) -> str | None:
    """Why `host:port` cannot be used by `art ui` (None when it can): a port out of range, or a host that is not
    loopback (the UI has no key of its own; `art serve` mounts it under /ui behind its key)."""
    from ..serve.app import is_loopback

    if not 0 <= port <= 65535:
        return f"--port {port} is not a port (0..65535)"
    if not is_loopback(host):
        return (
            f"--host {host}: `art ui` serves only this machine (loopback) because it has no key; to reach a "
            "record from elsewhere, run `art serve` there (its key protects /ui) or forward the port over ssh"
        )
    return None


def ui_command(path: Path, host: str, port: int, *, echo: Echo) -> None:
    """Serve the UI over `path` until interrupted; prints where to open it."""
    import uvicorn

    from ..service.server import bind_socket, http_url
    from .app import create_app

    app = create_app(path)
    sock = bind_socket(host, port)
    url = http_url(host, sock.getsockname()[1])
    _, problems = app.state.reader.models()
    echo(f"art ui: reading {path.resolve()} (read-only) at {url}/")
    for problem in problems:
        echo(f"  note: {problem}")
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    server.run(sockets=[sock])
