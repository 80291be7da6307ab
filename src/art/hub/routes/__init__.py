"""The `/v1/art/` routes of `art serve`, one module per resource: models, training jobs, checkpoints.

Each module adds its routes over a `ServiceHub` to the router `art.hub.api.create_api` makes under the
prefix. A new resource is a new module here plus one line in `create_api`.
"""
