"""The `/v1/art/` routes of `art serve`, one module per resource: models, training jobs, checkpoints.

Each module's factory returns a router over a `ServiceHub`; `art.serve.api.create_api` mounts them under the
prefix. A new resource is a new module here plus one line in `create_api`.
"""
