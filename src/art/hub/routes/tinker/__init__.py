"""The Tinker API of `art serve` under `/api/v1/` (what the official `tinker` SDK calls), one module per
concern: `session` (client config, sessions, heartbeats), `training` (models, forward/backward, steps,
saves and loads), `sampling`, `futures` (retrieve_future) and `runs` (the RestClient's listings).
Every route takes the key check and the server's Tinker state from `shared`; the work is in
`art.hub.tinker`. docs/tinker.md says what the SDK can do here and what is refused.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends

from art.hub.routes.tinker import futures, runs, sampling, session, training
from art.hub.routes.tinker.shared import tinker_of

PREFIX = "/api/v1"


def create_tinker_api() -> APIRouter:
    """The `/api/v1/` router; include it in an app that `shared.attach_tinker` prepared."""
    api = APIRouter(prefix=PREFIX, dependencies=[Depends(tinker_of)], include_in_schema=False)
    for routes in (session, training, sampling, futures, runs):
        api.include_router(routes.router)
    return api
