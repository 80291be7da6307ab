"""`art.utils.record_provenance` against W&B's public API, replaced by a stand-in that keeps artifacts in a
dict (W&B's servers are not reachable here): the tags a user would see on the artifact."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, ClassVar

import pytest

wandb = pytest.importorskip("wandb")

from art.utils import record_provenance  # noqa: E402


class Artifact:
    def __init__(self, metadata: dict[str, Any]) -> None:
        self.metadata = metadata
        self.saves = 0

    def save(self) -> None:
        self.saves += 1


class Api:
    artifacts: ClassVar[dict[str, Artifact]] = {}

    def artifact(self, path: str, type: str | None = None) -> Artifact:
        assert type == "lora"
        if path not in self.artifacts:
            raise wandb.errors.CommError(f"artifact {path} not found")
        return self.artifacts[path]


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> type[Api]:
    Api.artifacts = {}
    monkeypatch.setattr(wandb, "Api", Api)
    return Api


RUN = SimpleNamespace(entity="team", project="proj", name="agent-7")


def test_tags_are_appended_in_order_and_never_repeated_back_to_back(api: type[Api]) -> None:
    artifact = api.artifacts["team/proj/agent-7:latest"] = Artifact({"other": 1})
    record_provenance(RUN, "local-sft")
    record_provenance(RUN, "local-rl")
    record_provenance(RUN, "local-rl")
    assert artifact.metadata == {"other": 1, "wandb.provenance": ["local-sft", "local-rl"]}
    assert artifact.saves == 3


def test_a_run_without_an_artifact_is_left_alone(api: type[Api]) -> None:
    record_provenance(RUN, "local-rl")  # no error, nothing created
    assert api.artifacts == {}


def test_an_empty_tag_is_refused(api: type[Api]) -> None:
    with pytest.raises(ValueError, match="provenance must be a non-empty string"):
        record_provenance(RUN, " ")
