"""Shared test setup: offline environment and tiny models made on the spot (see DESIGN.md section 5)."""

from __future__ import annotations

import os

# Nothing in the test suite may reach a model hub or a price table.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def tiny_model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random-weight tiny Llama with a ChatML tokenizer (no tool support in its own template)."""
    pytest.importorskip("torch", reason="needs the `local` extra: pip install -e '.[local]'")
    from art.testing.tiny_model import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="session")
def tiny_qwen2_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random-weight tiny Qwen2 (attention biases) with the same tokenizer."""
    pytest.importorskip("torch", reason="needs the `local` extra: pip install -e '.[local]'")
    from art.testing.tiny_model import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("tiny-qwen2"), arch="qwen2", seed=1)
