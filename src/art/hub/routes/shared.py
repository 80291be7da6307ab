"""What every route of `art serve`'s training APIs uses: the app's hub and its body limit, as dependencies.

`attach` keeps both in the app's state (`art.hub.app.build_app` calls it); a route takes `hub: Hub` or
`limit: BodyLimit` and FastAPI hands it the app's, so the routers are plain module-level `APIRouter`s,
one per resource, that any app with a hub attached can include (vLLM's entrypoints do the same with their
engine client).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, FastAPI, Request

from art.hub.models import ServiceHub


def attach(app: FastAPI, hub: ServiceHub, *, max_body_bytes: int) -> None:
    """Make `hub` and the body limit the ones the routes of `app` get (`app.state.hub`, `.max_body_bytes`)."""
    app.state.hub = hub
    app.state.max_body_bytes = max_body_bytes


def hub_of(request: Request) -> ServiceHub:
    """The hub of the app serving `request` (see `attach`)."""
    hub: ServiceHub = request.app.state.hub
    return hub


def body_limit_of(request: Request) -> int:
    """The largest request body the app takes, in bytes (see `attach`)."""
    limit: int = request.app.state.max_body_bytes
    return limit


Hub = Annotated[ServiceHub, Depends(hub_of)]
"""A route's parameter of this type gets the app's hub."""

BodyLimit = Annotated[int, Depends(body_limit_of)]
"""A route's parameter of this type gets the app's body limit, in bytes."""
