"""What the reference's engine/trainer settings (`art.dev.InternalModelConfig`, `art.dev.OpenAIServerConfig`)
mean for `LocalBackend`: applied where there is a counterpart here, warned about (once each) where not.

Applied:
- `init_args.max_seq_length`, `engine_args.max_model_len` -> the engine's context window (`max_model_len`);
- `engine_args.max_num_seqs` -> sequences decoded together (`max_num_seqs`);
- `init_args.dtype`, `engine_args.dtype` -> the weights' dtype (`"auto"` keeps ours);
- `engine_args.max_loras` -> how many trained steps stay loaded (`max_loaded_adapters`; older ones
  still load on demand, as vLLM reloads an evicted adapter).
- `trainer_gpu_ids`, `inference_gpu_ids` (dedicated mode) -> the same options: vLLM serves on the inference
  GPUs, one trainer rank trains on each trainer GPU (`art.cluster.placement`, docs/scale.md);
  `engine_args.tensor_parallel_size` -> `tensor_parallel_size`.

- `chat_template` (the Jinja text) or `chat_template_path` (a file holding it) -> the model's chat template,
  for serving and training alike (`configured_chat_template`; the torch engine).

Everything else (GPU memory fractions, Unsloth/vLLM/Tinker switches, trainer arguments) has no
effect here and says so. A GPU layout the reference refuses
(`art.dev.validate_dedicated_config`) raises its `ValueError` here too, before anything loads.

    >>> resolve_internal_config({"init_args": {"max_seq_length": 8192}}, None).max_model_len
    8192
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# (section, key) -> our option name
_APPLIED: dict[tuple[str, str], str] = {
    ("init_args", "max_seq_length"): "max_model_len",
    ("engine_args", "max_model_len"): "max_model_len",
    ("engine_args", "max_num_seqs"): "max_num_seqs",
    ("init_args", "dtype"): "dtype",
    ("engine_args", "dtype"): "dtype",
    ("engine_args", "max_loras"): "max_loaded_adapters",
    ("engine_args", "tensor_parallel_size"): "tensor_parallel_size",
}
_TOP_LEVEL = ("trainer_gpu_ids", "inference_gpu_ids")  # the same names as ours
_SECTIONS = ("init_args", "engine_args")
_TEMPLATE_KEYS = ("chat_template", "chat_template_path", "chat_template_content_format")

_warned: set[str] = set()


@dataclass
class InternalOptions:
    """Our options that the reference's settings set (None: not set there)."""

    max_model_len: int | None = None
    max_num_seqs: int | None = None
    dtype: str | None = None
    max_loaded_adapters: int | None = None
    tensor_parallel_size: int | None = None
    trainer_gpu_ids: tuple[int, ...] | None = None
    inference_gpu_ids: tuple[int, ...] | None = None
    ignored: list[str] = field(default_factory=list)

    def options(self) -> dict[str, Any]:
        """The `RuntimeOptions` fields these settings give (None: not given)."""
        return {
            "max_model_len": self.max_model_len,
            "max_num_seqs": self.max_num_seqs,
            "dtype": self.dtype,
            "max_loaded_adapters": self.max_loaded_adapters,
            "tensor_parallel_size": self.tensor_parallel_size,
            "trainer_gpu_ids": self.trainer_gpu_ids,
            "inference_gpu_ids": self.inference_gpu_ids,
        }


def _warn_once(key: str) -> None:
    if key in _warned:
        return
    _warned.add(key)
    warnings.warn(
        f"{key} (from the reference's art.dev settings) has no effect with this LocalBackend and was "
        "ignored; see docs/compat.md for the settings that apply. This warning is shown once.",
        stacklevel=4,
    )


def resolve_internal_config(
    internal_config: Mapping[str, Any] | None, server_config: Mapping[str, Any] | None
) -> InternalOptions:
    """Our options from a model's `_internal_config` and a `register(..., _openai_client_config=...)`;
    the latter wins where both set one. Warns once for each setting that has no effect here."""
    from art.dev.validate import validate_dedicated_config

    validate_dedicated_config(internal_config or {})
    options = InternalOptions()
    for source_name, source in (
        ("_internal_config", internal_config),
        ("_openai_client_config", server_config),
    ):
        for key, value in (source or {}).items():
            if key in _TEMPLATE_KEYS and source_name == "_internal_config":
                continue  # applied by the backend (configured_chat_template)
            if key in _TOP_LEVEL and source_name == "_internal_config":
                setattr(options, key, tuple(value))
                continue
            if key in _SECTIONS and isinstance(value, Mapping):
                for sub, sub_value in value.items():
                    target = _APPLIED.get((key, sub))
                    if target is None:
                        options.ignored.append(f"{source_name}.{key}.{sub}")
                    elif not (target == "dtype" and sub_value in (None, "auto")):
                        setattr(options, target, sub_value)
            else:
                options.ignored.append(f"{source_name}.{key}")
    for key in options.ignored:
        _warn_once(key)
    return options


def configured_chat_template(internal_config: Mapping[str, Any] | None) -> str | None:
    """The chat template a model's `_internal_config` sets: `chat_template` (the text) or the contents of
    `chat_template_path`; None when neither. Both at once is a ValueError (as in the reference).

    Example:
        >>> configured_chat_template({"chat_template": "{{ messages }}"})
        '{{ messages }}'
    """
    config = internal_config or {}
    text, path = config.get("chat_template"), config.get("chat_template_path")
    if text is not None and path is not None:
        raise ValueError(
            "_internal_config: Set only one of chat_template or chat_template_path (both were given)"
        )
    if path is not None:
        with open(path, encoding="utf-8") as f:
            return f.read()
    return None if text is None else str(text)


# The reference's helpers of `art.local.backend` (kept there under these names, for code that calls them).
def _apply_configured_chat_template(tokenizer: Any, internal_config: Mapping[str, Any]) -> None:
    """Set `tokenizer.chat_template` to the model's configured template, if it has one (the reference's
    helper; LocalBackend applies it to the model it serves and trains)."""
    template = configured_chat_template(internal_config)
    if template is not None:
        tokenizer.chat_template = template


def _apply_configured_chat_template_server_args(
    config_dict: dict[str, Any], internal_config: Mapping[str, Any]
) -> None:
    """Add the configured template to a vLLM server config's `server_args` (a path, or the text), with its
    `chat_template_content_format`; what `server_args` already sets wins (the reference's helper)."""
    text, path = internal_config.get("chat_template"), internal_config.get("chat_template_path")
    if text is not None and path is not None:
        configured_chat_template(internal_config)  # raises, naming both
    template = path or text
    if template is None:
        return
    server_args = dict(config_dict.get("server_args") or {})
    server_args.setdefault("chat_template", template)
    if content_format := internal_config.get("chat_template_content_format"):
        server_args.setdefault("chat_template_content_format", content_format)
    config_dict["server_args"] = server_args


def _tokenizer_cache_key(base_model: str, internal_config: Mapping[str, Any]) -> tuple[str, str | None]:
    """(base model, the configured template's text): two models share a tokenizer only when both match."""
    return base_model, configured_chat_template(internal_config)
