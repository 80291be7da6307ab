"""The Tinker API's side of `art serve` (DESIGN.md section 13): a thin translation of the official `tinker`
SDK's calls onto the hub's models, their trainer and their checkpoints.

- `ids`: model ids (`{session}:train:{n}`) <-> record names, and `tinker://` paths <-> checkpoint steps;
- `futures`: the SDK's futures (work POSTs answer a request id at once; `retrieve_future` long-polls);
- `wire`: the protobuf messages of forward_backward and sample (the SDK's own schema, read with protobuf);
- `training`: sessions, training models (one record each, project `tinker`), their calls in order;
- `sampling`: sampling sessions over the engine that serves a record's checkpoints.

The routes are in `art.hub.routes.tinker`; the losses in `art.training.token_losses`.
"""
