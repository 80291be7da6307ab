"""The rollout room: what user code calls while it collects trajectories, before anything trains.

- `gather`            gather_trajectory_groups / gather_trajectories: concurrency, progress bar, exception budget
- `batches`           trajectory_group_batches: groups in batches as they finish
- `auto_trajectory`   a trajectory recorded from the chat completions a coroutine makes
- `yield_trajectory`  a trajectory handed out from deep inside a coroutine
- `leases`            pin_inference_step: every request of a rollout names the step it began on
- `guided_completion` a teacher's completion as a frozen tool call / guided choice (distillation)
- `training_input`    the checks a training step's input passes before anything trains

It imports only the core (`art.trajectories`), so every side (the client, `art serve`, the service) may
use it. The reference's paths (`art.gather`, `art.adapter_leases`, ...) are shims of this room.
"""
