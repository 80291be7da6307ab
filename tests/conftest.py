"""Shared test setup: offline environment and tiny models made on the spot (see DESIGN.md section 5)."""

from __future__ import annotations

import os
import sys

# Nothing in the test suite may reach a model hub or a price table.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from pathlib import Path

import pytest

import art

sys.path.insert(0, os.path.dirname(__file__))  # tests/helpers_*.py importable from every test folder


def pytest_configure(config: pytest.Config) -> None:
    """`ART_TEST_HIDE_CPU_BF16=1` (the AVX2 and AVX-512-without-BF16 profiles of `art.testing.host_kinds`, run
    by tests/kernels/test_host_kinds.py): ART sees a CPU without bf16 instructions, as on such a host."""
    from art.testing.host_kinds import hide_cpu_bf16_if_asked

    hide_cpu_bf16_if_asked()


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


# ---- a test double for the Backend protocol (client-side tests only) ----------------------------------
class FakeBackend(art.Backend):
    """Implements `art.Backend` without a model: each train() call writes an empty checkpoint folder."""

    def __init__(self) -> None:
        self.register_calls = 0
        self.train_calls: list[dict[str, object]] = []
        self.sft_calls: list[dict[str, object]] = []
        self.fail_next_train = False
        self.path: str | None = None  # a folder of its own for the records, as `LocalBackend(path=...)`

    def record_path(self) -> str | None:
        return self.path

    async def register(self, model):  # type: ignore[no-untyped-def]
        from art.types import Registration

        self.register_calls += 1
        if model.trainable and not model.storage.checkpoint_steps():
            self._save(model, 0)
        return Registration(base_url="http://127.0.0.1:9/v1", api_key="k", step=await self.get_step(model))

    def _save(self, model, step):  # type: ignore[no-untyped-def]
        tmp = model.storage.new_checkpoint_tmp_dir(step)
        (tmp / "adapter_config.json").write_text("{}")
        model.storage.commit_checkpoint(tmp, step, {})

    async def get_step(self, model):  # type: ignore[no-untyped-def]
        return model.storage.latest_checkpoint_step() or 0

    def _model_inference_name(self, model, step=None):  # type: ignore[no-untyped-def]
        # the reference's LocalBackend rule: the newest checkpoint on disk unless a step is named
        latest = model.storage.latest_checkpoint_step() or 0
        return f"{model.name}@{latest if step is None else step}"

    async def train(self, model, trajectory_groups, **kwargs):  # type: ignore[no-untyped-def]
        from art.backends.base import prepare_groups_for_training, train_spec_from_kwargs
        from art.types import TrainResult

        spec = train_spec_from_kwargs(**kwargs)
        groups = prepare_groups_for_training(trajectory_groups)
        self.train_calls.append({"spec": spec, "groups": groups})
        if self.fail_next_train:
            self.fail_next_train = False
            raise RuntimeError("trainer crashed")
        step = await self.get_step(model) + 1
        self._save(model, step)
        return TrainResult(step=step, metrics={"loss/train": 0.5})  # the reference's names, as ours

    async def train_sft(self, model, trajectories, *, verbose=False, **kwargs):  # type: ignore[no-untyped-def]
        """Records what it was given (reading the stream, like a real backend) and writes one checkpoint."""
        from art.backends.base import prepare_sft_trajectories, sft_spec_from_kwargs
        from art.types import TrainSFTResult

        spec = sft_spec_from_kwargs(**kwargs)
        items, _ = prepare_sft_trajectories(trajectories, spec)
        trajectories = list(items)
        self.sft_calls.append({"spec": spec, "trajectories": trajectories})
        step = await self.get_step(model) + 1
        self._save(model, step)
        return TrainSFTResult(step=step, metrics={"loss/train": 0.5}, batch_metrics=[{"loss": 0.5}])

    async def delete_checkpoints(self, model, steps_to_keep):  # type: ignore[no-untyped-def]
        latest = model.storage.latest_checkpoint_step()
        for step in model.storage.checkpoint_steps():
            if step not in steps_to_keep and step != latest:
                model.storage.delete_checkpoint(step)

    async def close(self) -> None:
        pass


@pytest.fixture
def fake_backend() -> FakeBackend:
    return FakeBackend()
