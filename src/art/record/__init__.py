"""The record room: everything a run leaves on disk under `.art/`, and the one place that knows its paths.

- `storage`      ModelStorage: a model's folder (history, trajectories, checkpoints, state), atomic writes,
                 name checks, JSON lines; `read_*` helpers users call to read a run
- `recovery`     a committed step whose `model.log` never ran gets its record from its checkpoint
- `lock`         one writer per model record (an OS file lock)
- `step_record`  what the trainer recorded about a step (advantages, fates, trained tokens)
- `parquet`      the reference's Parquet trajectory files (`art.utils.trajectory_logging`)
- `plots`        the reward chart of a run (`history.png`)

It imports only the core (`art.trajectories`) and `art.metrics` (recovery rebuilds a history line), never
the model, backends or the heavy side. `art.storage`, `art.plotting` and
`art.utils.trajectory_logging` are shims of this room.
"""
