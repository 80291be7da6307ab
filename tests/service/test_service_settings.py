"""Runtime switches are checked when the backend is made, before loading or training anything."""

from __future__ import annotations

import pytest

from art.backends.local import LocalBackend
from art.types import RuntimeOptions


def test_a_bad_release_setting_in_the_environment_fails_at_once_and_names_the_fix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ART_RELEASE_MEMORY", "sometimes")
    with pytest.raises(ValueError, match=r"ART_RELEASE_MEMORY='sometimes'.*'always' or 'never'"):
        LocalBackend()


def test_environment_variables_override_the_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ART_ENGINE_FOLD_LORA", "0")
    monkeypatch.setenv("ART_TRAIN_CPP_ATTENTION", "off")
    backend = LocalBackend(options=RuntimeOptions(fold_lora=True, share_prefixes=False))
    assert backend.options.fold_lora is False
    assert backend.options.train_cpp_attention is False
    assert backend.options.share_prefixes is False  # untouched by the environment


def test_keywords_override_fields_of_the_options_object(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("ART_DEVICE", "ART_ENGINE"):
        monkeypatch.delenv(variable, raising=False)
    backend = LocalBackend(
        device="cpu", max_num_seqs=8, options=RuntimeOptions(max_num_seqs=4, dtype="float32")
    )
    assert (backend.options.device, backend.options.max_num_seqs, backend.options.dtype) == (
        "cpu",
        8,
        "float32",
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"device": "gpu"}, r"device.*'gpu'.*\"auto\", \"cpu\", \"cuda\" or \"cuda:N\""),
        ({"engine": "tensorrt"}, r"engine"),
        ({"max_num_seqs": 0}, r"max_num_seqs"),
        ({"train_sharding": "fsdp"}, r"train_sharding: Input should be 'ddp' or 'fsdp2'"),
    ],
)
def test_a_bad_option_names_the_field(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LocalBackend(**kwargs)  # type: ignore[arg-type]


def test_train_sharding_is_a_keyword_and_an_option_and_ddp_by_default() -> None:
    assert LocalBackend().options.train_sharding == "ddp"
    assert LocalBackend(train_ranks=2, train_sharding="fsdp2").options.train_sharding == "fsdp2"
    # one rank: nothing to shard across, the trainer in this process (no effect, no error)
    assert RuntimeOptions(train_sharding="fsdp2").ranks == 1
    with pytest.raises(ValueError, match=r"train_sharding\n  Input should be 'ddp' or 'fsdp2'"):
        RuntimeOptions(train_sharding="zero3")  # type: ignore[arg-type]


def test_a_device_that_is_not_here_names_what_is(tmp_path: object) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    from art.base_model.loader import resolve_device

    assert resolve_device("auto") == torch.device("cpu")
    with pytest.raises(ValueError, match=r"device='cuda:1', but this machine has no CUDA device.*\"cpu\""):
        resolve_device("cuda:1")
