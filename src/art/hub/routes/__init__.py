"""The routes of `art serve`'s training APIs, one module per resource, each a module-level `APIRouter`.

`/v1/art/` (ours): `models`, `training_jobs` (and their events), `checkpoints`, put under one router by
`art.hub.api.create_api`. `/v1/preview/` (the reference's serverless API): the package `serverless`, one
module per resource the same way. Every route takes the app's hub and body limit as dependencies
(`shared`), so no route closes over them. A new resource is a new module plus one line where its
neighbours are included.
"""
