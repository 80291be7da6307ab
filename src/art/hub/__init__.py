"""`art serve` and its training API: models, training jobs, checkpoints over HTTP (DESIGN.md section 7).

`protocol` (the wire shapes) is light and shared with the client (`art.backends.remote`); the server side
(`app`, `api`, `hub`, `jobs`) loads the service and is imported only by `art serve`.
"""
