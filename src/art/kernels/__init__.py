"""CPU kernels and CPU helpers shared by the torch engine and the trainer.

Nothing heavy is imported here; import the modules you need:

- `cpp_kernels`    C++ kernels (sources in `csrc/`) for decode steps and training's softmaxes, with checks
                   against the torch ops they replace and a torch fallback
- `packed_linear`  oneDNN-prepacked bf16 matmul weights
- `allocator`      giving freed memory back to the OS (glibc `malloc_trim`), when the machine is short
- `cpu_env`        oneDNN/ideep cache sizes that must be set before they first run

None of this runs on CUDA: callers check `device.type == "cpu"` (and `cpp_kernels.supported`) first.
"""
