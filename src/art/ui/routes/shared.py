"""What every `art ui` route uses: the app's record reader (a dependency), the page's base URL below the
mount point, and HTML answers (a page, a 404 that links back to all models)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.responses import HTMLResponse

from art.ui import pages
from art.ui.record import ModelRef, RecordReader


def reader_of(request: Request) -> RecordReader:
    """The record the app reads (`create_app` keeps it in `app.state.reader`)."""
    reader: RecordReader = request.app.state.reader
    return reader


Reader = Annotated[RecordReader, Depends(reader_of)]
"""A route's parameter of this type gets the app's record reader."""


def base(request: Request) -> str:
    """The app's mount point (`/ui` under `art serve`, empty under `art ui`), for the links it writes."""
    return str(request.scope.get("root_path", "")).rstrip("/")


def page(html: str, status: int = 200) -> HTMLResponse:
    """An HTML answer the browser never caches (the record changes while a run trains)."""
    return HTMLResponse(html, status_code=status, headers={"Cache-Control": "no-store"})


def not_found(request: Request, what: str) -> HTMLResponse:
    """404 saying `what` is missing, with a link to all models."""
    b = base(request)
    return page(pages.message_page(b, "Not found", pages.e(what) + f' <a href="{b}/">All models</a>'), 404)


def no_model(request: Request, project: str, name: str) -> HTMLResponse:
    """404 for a model the record does not have."""
    return not_found(request, f"The record has no model {project}/{name}.")


def model_ref(reader: RecordReader, model_id: str) -> ModelRef | None:
    """The model named `project/name`, or None."""
    project, _, name = model_id.partition("/")
    return reader.model(project, name)
