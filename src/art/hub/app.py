"""`art serve`: the service for any number of models on one machine, in one process on one port.

One FastAPI app carries both faces of the service with the same key: the OpenAI-compatible routes
(`/v1/chat/completions`, `/v1/models`), where a request goes to the engine serving its `model` name
(`EngineRouter`), and the training API under `/v1/art/` (`art.hub.api`); `art ui`'s read-only pages over
the same record are mounted under `/ui` (the key, or the cookie its login form sets). A client uses
`art.RemoteBackend(url, api_key)`; the reference's `ServerlessBackend(base_url=url + "/v1", api_key=...)`
works too, through its own API under `/v1/preview/` (`art.hub.routes.serverless`).

Security: it binds to loopback by default. Every route requires `Authorization: Bearer <key>`; the key
lives in a file readable only by its owner (made with a random key at the first start, by default
`{path}/.serve/api_key`). Binding any other interface without a key is refused at start, with the reason.
The key is never logged (no access log; errors do not echo headers). Clients load base models by Hugging
Face id or short name; a `base_model` that is a path on the server must lie under a `--base-model-root`.
One `art serve` per folder (`--path`): a second one is refused at start, naming the first.

Start-up: bind the port first (so a taken port fails at once), restore the models this folder's server
served before (each from its newest complete checkpoint; their unfinished jobs settled) and load the base
models to chat with (`--model NAME`, `ServeConfig.chat_models`: served under the name given, no training)
while clients wait in the listen backlog, then print where to connect. A chat model that cannot load stops
the start (`ServeError` naming it). SIGINT/SIGTERM: queued jobs fail (nothing of
them ran), a running step may finish for up to `job_grace_seconds`, and every service stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import secrets
import stat
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI

from art.backends.remote_protocol import API_PREFIX, DEFAULT_MAX_BODY_BYTES, DEFAULT_PORT
from art.record.lock import RecordInUseError, RecordLock, describe_holder
from art.record.storage import serve_api_key_path, serve_dir
from art.types import RuntimeOptions

if TYPE_CHECKING:
    from art.hub.models import ServiceHub  # heavy (the service): imported when the app is built

logger = logging.getLogger(__name__)
UI_PREFIX = "/ui"  # `art ui`'s pages over the served record, behind the same key


MIN_API_KEY_CHARS = 16
"""The shortest key `art serve` accepts from a key file (the ones it makes have 47 characters)."""


class ServeError(Exception):
    """`art serve` cannot start as asked; the message says why and, after "; ", what to do. `flag` names
    the option at fault."""

    def __init__(self, message: str, flag: str) -> None:
        super().__init__(message)
        self.flag = flag


@dataclass
class ServeConfig:
    """Everything `art serve` takes (the CLI's options)."""

    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    path: Path = Path(".art")
    api_key_file: Path | None = None  # None: {path}/.serve/api_key
    no_api_key: bool = False  # loopback only: serve without a key
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    options: RuntimeOptions = field(default_factory=RuntimeOptions)
    progress: bool = True  # the service's own progress bars (on the server's terminal)
    job_grace_seconds: float = 120.0  # how long a shutdown lets a running step finish
    gpu_cost_per_hour_usd: float | None = None  # per GPU, for clients' costs/gpu (None: known GPUs only)
    base_model_roots: tuple[Path, ...] = ()  # folders a base_model path may be under (none: ids only)
    chat_models: tuple[str, ...] = ()  # base models served at start for chat only, by these names (--model)
    tinker_models: tuple[tuple[str, str], ...] = ()  # (name, base model) for Tinker clients (--tinker-model)

    @property
    def key_file(self) -> Path:
        return self.api_key_file or serve_api_key_path(self.path)


def is_loopback(host: str) -> bool:
    """Whether `host` names this machine only (127.0.0.0/8, ::1, localhost)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def load_or_create_api_key(path: Path) -> tuple[str, bool]:
    """The key in `path`, or a new random one written there readable by its owner only; (key, created).

    An existing file that others may read is refused (as ssh does), with the command that fixes it; so is
    a key shorter than `MIN_API_KEY_CHARS`."""
    if path.exists():
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            raise ServeError(
                f"the API key file {path} can be read by other users (mode {mode:o}); "
                f"run `chmod 600 {path}` and start again",
                "--api-key-file",
            )
        key = path.read_text(encoding="utf-8").strip()
        if not key:
            raise ServeError(
                f"the API key file {path} is empty; delete it to get a new key, or write one in it",
                "--api-key-file",
            )
        if len(key) < MIN_API_KEY_CHARS:
            raise ServeError(
                f"the API key in {path} has {len(key)} characters; at least {MIN_API_KEY_CHARS} are required "
                "(a short key can be guessed). Delete the file to get a new random key, or write a longer one",
                "--api-key-file",
            )
        return key, False
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    key = f"tml-{secrets.token_urlsafe(32)}"  # `tml-`: the Tinker SDK takes no other key (docs/tinker.md)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(key + "\n")
    return key, True


def resolve_api_key(config: ServeConfig) -> tuple[str | None, bool]:
    """The key the server requires (None: none) and whether it was just made; refuses an open non-loopback
    bind with the reason."""
    if config.no_api_key:
        if not is_loopback(config.host):
            raise ServeError(
                f"refusing to serve on {config.host} without an API key: anyone who can reach this "
                "machine could train and query your models; drop --no-api-key (a key is made for you) or "
                "bind 127.0.0.1",
                "--no-api-key",
            )
        return None, False
    return load_or_create_api_key(config.key_file)


def build_app(config: ServeConfig, api_key: str | None) -> tuple[FastAPI, ServiceHub]:
    """The app `art serve` runs (OpenAI routes + `/v1/art/`) and its hub; restores models at start-up."""
    from fastapi import Request
    from fastapi.responses import JSONResponse

    from art.hub.api import create_api, openapi_document
    from art.hub.api_errors import storage_refused
    from art.hub.models import ServiceHub
    from art.hub.routes.serverless import create_serverless_api
    from art.hub.routes.shared import attach
    from art.hub.routes.tinker import PREFIX as TINKER_PREFIX
    from art.hub.routes.tinker import create_tinker_api
    from art.hub.routes.tinker.shared import attach_tinker
    from art.openai_server.http import create_app, error_response

    hub = ServiceHub(
        config.path,
        config.options,
        progress=config.progress,
        gpu_cost_per_hour_usd=config.gpu_cost_per_hour_usd,
        base_model_roots=config.base_model_roots,
    )
    from art.ui.app import create_app as create_ui_app

    app = create_app(
        hub.router,
        api_key=api_key,
        max_body_bytes=config.max_body_bytes,
        own_auth_prefixes=(UI_PREFIX, TINKER_PREFIX),  # the Tinker SDK sends X-API-Key, checked there
    )
    app.mount(UI_PREFIX, create_ui_app(config.path, api_key=api_key))  # `art ui` over this server's record
    attach(app, hub, max_body_bytes=config.max_body_bytes)  # the routes below take both from there
    api = app.state.art_api = create_api()
    app.include_router(api)
    # the reference's serverless training API (its own ServerlessBackend drives this server: docs/remote.md)
    app.include_router(create_serverless_api(hub))
    # the Tinker API: the official `tinker` SDK with base_url=<this server> (docs/tinker.md)
    tinker = attach_tinker(app, hub, api_key, aliases=dict(config.tinker_models))
    app.include_router(create_tinker_api())
    document = openapi_document(api)

    @app.exception_handler(OSError)
    async def disk_error(request: Request, exc: OSError) -> JSONResponse:  # a full disk is a 507, not a bug
        logger.error("%s %s: %s", request.method, request.url.path, exc)
        return error_response(storage_refused(exc, f"{request.method} {request.url.path}"))

    @app.get(f"{API_PREFIX}/openapi.json", include_in_schema=False)
    async def openapi() -> dict[str, Any]:
        return document

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        restored = await hub.restore()
        if restored:
            logger.info("restored %d model(s): %s", len(restored), ", ".join(restored))
        try:
            for name in dict.fromkeys(config.chat_models):
                try:
                    await hub.serve_chat_model(name)
                except Exception as e:  # the start stops (`_serve`), in one line: no traceback from uvicorn
                    logger.debug("loading %r to chat with failed", name, exc_info=True)
                    said = " ".join(str(e).split()).replace("; ", ", ")[:400]  # "; " ends the problem
                    app.state.start_error = ServeError(
                        f"{name} could not be served for chat: {type(e).__name__}: {said}; "
                        "give a model that loads (a short name, a Hugging Face id or a folder)",
                        "--model",
                    )
                    break
            yield
        finally:
            await tinker.futures.close()
            await hub.close(job_timeout=config.job_grace_seconds)

    app.router.lifespan_context = lifespan
    return app, hub


async def serve(config: ServeConfig, *, echo: Callable[[str], None] = print) -> None:
    """Run `art serve` until SIGINT/SIGTERM (see the module docstring); `ServeError` when another `art serve`
    holds the folder (`--path`), naming it."""
    api_key, created = resolve_api_key(config)
    lock = RecordLock(serve_dir(config.path), owner=f"art serve on port {config.port}")
    try:
        lock.acquire()  # one server per folder: two would both write its models' records
    except RecordInUseError as e:
        raise ServeError(
            f"another `art serve` already serves {config.path}: {describe_holder(e.holder)}; stop it first, "
            "or give this one another --path",
            "--path",
        ) from None
    try:
        await _serve(config, api_key, created, echo=echo)
    finally:
        lock.release()


async def _serve(
    config: ServeConfig, api_key: str | None, created: bool, *, echo: Callable[[str], None]
) -> None:
    import uvicorn

    from art.openai_server.http import bind_socket, http_url

    try:
        sock = bind_socket(config.host, config.port)
    except OSError as e:
        raise ServeError(
            f"cannot bind {config.host}:{config.port}: {e.strerror or e} (is another `art serve` running "
            "there?); pass another --port",
            "--port",
        ) from None
    app, hub = build_app(config, api_key)
    server = uvicorn.Server(
        uvicorn.Config(
            app, log_level="warning", access_log=False, timeout_keep_alive=30, timeout_graceful_shutdown=5
        )
    )
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    while not server.started and not task.done():
        await asyncio.sleep(0.05)
    failed = getattr(app.state, "start_error", None)
    if failed is not None:  # a chat model did not load: stop before saying where to connect
        server.should_exit = True
        await task
        raise failed
    if server.started:
        url = http_url(config.host, sock.getsockname()[1])
        served = [f"{h.id}@{h.service.step}" for h in hub.models.values()]
        served += [f"{name} (chat)" for name in hub.chat_models]
        echo(f"ART serving at {url}  (models: {', '.join(served) or 'none yet'})")
        echo(f"  OpenAI-compatible: {url}/v1   training API: {url}{API_PREFIX}/ (docs/remote.md)")
        echo(f"  record (read-only pages): {url}{UI_PREFIX}/ (docs/ui.md)")
        echo(f"  Tinker API: tinker.ServiceClient(base_url={url!r}, api_key=<the key>) (docs/tinker.md)")
        if api_key is None:
            echo("  no API key (--no-api-key; loopback only)")
        else:
            made = "made now, " if created else ""
            echo(f"  API key: in {config.key_file.resolve()} ({made}readable only by you)")
        where = (
            url if is_loopback(config.host) else f"http://<this machine's address>:{sock.getsockname()[1]}"
        )
        echo(f'  connect: art.RemoteBackend("{where}", api_key=<the key>)  (or set ART_API_KEY)')
        for name in hub.chat_models:
            echo(
                f'  chat: OpenAI(base_url="{where}/v1", api_key=<the key>).chat.completions.create(model="{name}", ...)'
            )
    await task


def run(config: ServeConfig, *, echo: Callable[[str], None] = print) -> None:
    """`asyncio.run(serve(config))`, with the service's INFO logs on stderr."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(serve(config, echo=echo))


def print_openapi_document() -> None:
    """Print the OpenAPI document of the training API (how docs/remote-openapi.json is made:
    `python -m art.hub.app > docs/remote-openapi.json`)."""
    import json
    import tempfile

    from art.hub.api import openapi_document

    app, _ = build_app(ServeConfig(path=Path(tempfile.mkdtemp())), api_key=None)
    print(json.dumps(openapi_document(app.state.art_api), indent=2))


if __name__ == "__main__":
    print_openapi_document()
