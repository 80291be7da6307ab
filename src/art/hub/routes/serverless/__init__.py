"""The reference's serverless training API, spoken by `art serve`, so its own client drives this server.

OpenPipe's ART trains hosted models through `ServerlessBackend(api_key=..., base_url=...)`, a client of W&B's
training API (`art.serverless.client` in the reference). Pointed at `art serve` (`base_url="http://host:7999/v1"`,
`api_key` = the server's key), that client works here unchanged: these routes, under `/v1/preview/`, map its
calls onto the same hub, jobs and checkpoints as our own `/v1/art/` API (`art.hub.api`), which stays as
it is.

- `POST /preview/models` {entity, project, name, base_model, return_existing}: serve the model (or find it);
  answers {id, entity, project, name, base_model, run_id}. The id is `"{project}:{name}"`; the entity is
  the one asked for (a W&B entity has no meaning here; "local" when none).
- `GET /preview/models/{id}/checkpoints?after=&limit=&order=`: a cursor page of {id, step, metrics}.
- `DELETE /preview/models/{id}/checkpoints` {steps}: {deleted_count, not_found_steps}; the step the model
  serves is never deleted (409).
- `POST /preview/models/{id}/log` {trajectory_groups, split}: the groups go to the model's record on the
  server, at its current step.
- `POST /preview/training-jobs` {model_id, trajectory_groups, experimental_config}: one training step,
  queued as a job of ours; the config's fields are `backend.train` keywords (`art.backends.train_options`:
  implemented, or accepted with no effect).
- `GET /preview/training-jobs/{id}/events?after=&limit=`: the job's events as the reference names them:
  `training_started` {num_sequences}, one `gradient_step` with the step's metrics (numbers only, the
  reference's names where it has them), then `training_ended`, or `training_failed` {error_message}.
- Chats: the reference names a served model `wandb-artifact:///{entity}/{project}/{name}` (the newest step)
  or `...:step{N}`; the OpenAI-compatible routes resolve both to `name` / `name@N`.

The routes live one resource per module, each a module-level `APIRouter` under `/v1/preview`: `models`
(create, delete, log), `checkpoints`, `training_jobs` (and their events, SFT jobs); `shared` has what they
share (the model id, the reference's metric names, the model names chats resolve). `create_serverless_api`
puts them under one router.

Not here: deleting a model (`DELETE /preview/models/{id}`: its record stays; 409 says so) and SFT jobs
(`POST /preview/sft-training-jobs` takes a W&B artifact URL this server cannot read: 422 says so; use
`RemoteBackend.train_sft`). Errors have OpenAI's shape, as everywhere on this server.
"""

from __future__ import annotations

from fastapi import APIRouter

from art.hub.models import ServiceHub
from art.hub.routes.serverless import checkpoints, models, training_jobs
from art.hub.routes.serverless.shared import PREFIX, artifact_name_resolver, serverless_model_id
from art.hub.routes.serverless.training_jobs import reference_events

__all__ = [
    "PREFIX",
    "artifact_name_resolver",
    "create_serverless_api",
    "reference_events",
    "serverless_model_id",
]


def create_serverless_api(hub: ServiceHub) -> APIRouter:
    """The `/v1/preview/` router (include it in `art serve`'s app, whose hub `art.hub.routes.shared.attach`
    set); also teaches `hub`'s router the reference's model names (`artifact_name_resolver`)."""
    hub.router.add_alias(artifact_name_resolver(hub))
    api = APIRouter()
    for routes in (models, checkpoints, training_jobs):
        api.include_router(routes.router)
    return api
