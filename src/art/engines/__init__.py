"""Inference engines: what turns prompt token ids into sampled tokens for the service.

- `base`    the `Engine` protocol every engine implements, its request/output types and errors
- `torch/`  the built-in engine (continuous batching, prefix cache, LoRA folded into CPU matmuls); the
            CPU default

Nothing heavy is imported here.
"""
