"""`EngineArgs`: the reference's vLLM engine arguments (a subset is typed; any key is accepted)."""

from __future__ import annotations

from typing import Any

from typing_extensions import TypedDict


class EngineArgs(TypedDict, total=False):
    """vLLM engine arguments. Applied here: `max_model_len` (context window), `max_num_seqs` (sequences
    decoded together), `dtype` ("auto" keeps ours), `max_loras` (trained steps kept loaded)."""

    model: str
    served_model_name: str | list[str] | None
    tokenizer: str | None
    trust_remote_code: bool
    dtype: str
    kv_cache_dtype: str
    seed: int
    max_model_len: int | None
    tensor_parallel_size: int
    pipeline_parallel_size: int
    enable_prefix_caching: bool | None
    gpu_memory_utilization: float
    max_num_batched_tokens: int | None
    max_num_seqs: int | None
    max_logprobs: int
    enforce_eager: bool | None
    enable_lora: bool
    max_loras: int
    max_lora_rank: int
    max_cpu_loras: int | None
    enable_sleep_mode: bool
    generation_config: str
    quantization: str | None
    rope_scaling: dict[str, Any] | None
