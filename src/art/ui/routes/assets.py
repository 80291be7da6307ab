"""`art ui`'s static files (its script and style sheet) and `/api/version`, the token a page polls to
refresh itself while a run trains."""

from __future__ import annotations

import functools
from importlib import resources

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response

from art.ui.routes.shared import Reader, model_ref

router = APIRouter()
STATIC = {"ui.js": "text/javascript", "ui.css": "text/css"}
"""The static files and their media types."""


@functools.cache
def _static_bytes(name: str) -> bytes:
    return (resources.files("art.ui") / "static" / name).read_bytes()


@router.get("/static/{name}")
def static_file(name: str) -> Response:
    """One of `STATIC`, else 404."""
    if name not in STATIC:
        return Response(status_code=404)
    return Response(_static_bytes(name), media_type=STATIC[name], headers={"Cache-Control": "no-cache"})


@router.get("/api/version")
def version(reader: Reader, model: str = "", split: str = "", step: int | None = None) -> JSONResponse:
    """A token that changes when what a page shows changes: the whole record, a model, or one step."""
    ref = model_ref(reader, model) if model else None
    if model and ref is None:
        return JSONResponse({"version": "", "error": f"no model {model!r} in the record"}, status_code=404)
    if ref is not None and split and step is not None:
        token = reader.step_version(ref, split, step)
    else:
        token = reader.version(ref)
    return JSONResponse({"version": token}, headers={"Cache-Control": "no-store"})
