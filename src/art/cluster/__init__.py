"""Scale-out: where a service's processes run beyond one process (DESIGN.md section 10).

- `placement`: the device plan (engine, trainer, trainer ranks) decided before anything loads;
- `scale_out`: the service's engine and trainer ranks started per that plan;
- `ray_cluster`, `replicas`, `ray_ranks`: inference replicas and trainer ranks as Ray actors (`art.ray`);
- `launch`: the SkyPilot task that runs `art serve` on a cloud GPU (`art launch`).

The ranks themselves (torch.distributed, gloo or NCCL) are training's: `art.training.distributed`.
"""
