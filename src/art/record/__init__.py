"""The record room: everything a run leaves on disk under `.art/`, and the one place that knows its paths.

- `storage`      ModelStorage: a model's folder (history, trajectories, checkpoints, state), the one place
                 that knows the record's paths; `read_*` helpers users call to read a run
- `files`        durable files: atomic writes, JSON lines appended and read back whatever a crash left
- `names`        names that become paths (`validate_name`)
- `serve_paths`  where `art serve` keeps its own state (`.serve/`)
- `model_log`    what `model.log` writes: the pipeline from trajectories and metrics to a history row,
                 the metrics builder's totals in state.json
- `recovery`     a committed step whose `model.log` never ran gets its record from its checkpoint
- `lock`         one writer per model record (an OS file lock)
- `undo`         a failed registration leaves no record behind (`RegistrationUndo`)
- `step_record`  what the trainer recorded about a step (advantages, fates, trained tokens)
- `parquet`      the reference's Parquet trajectory files (`art.utils.trajectory_logging`)
- `plots`        the reward chart of a run (`history.png`)
- `s3`           a model's folder backed up to S3 and pulled back (the AWS CLI, the reference's layout)
- `s3_checkpoints` a model's checkpoints pulled from disk or S3, its backup pulled, another's forked in
                 (what `LocalBackend`'s `_experimental_*` methods do)

It imports only the core (`art.trajectories`) and `art.metrics` (recovery rebuilds a history line), never
the model, backends or the heavy side. `art.record.storage`, `art.record.plots` and
`art.utils.trajectory_logging` are shims of this room.
"""
