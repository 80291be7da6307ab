"""The floor every room may stand on: small helpers that import nothing else of ours.

- `readable`  ReadableModel: `help()` of our pydantic classes shows our documentation first
- `waits`     long waits say what they wait for (a line on stderr after ~2 s, and when they end)
- `errors`    the reference's error types (`ARTError` and the deployment errors), `status_code` + `detail`

`art.common.waits` and `art.errors` are shims of this room.
"""
