"""Training across processes: N torch.distributed ranks (gloo on CPUs, NCCL on GPUs) that train each step.

`ranks` starts and supervises them (`RankGroup`, `LocalRanks`) and names the rank that failed a step;
`rank_main` is one local rank's process; `worker` what every rank runs; `ddp_trainer` and `fsdp_trainer` the
two ways the ranks share the LoRA (`RuntimeOptions.train_sharding`); `rank_messages` what crosses to them.
Ray places ranks on a cluster through the same `RankBackend` (`art.cluster.ray_ranks`).
"""
