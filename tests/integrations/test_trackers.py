"""Tracker selection and laziness: nothing is imported unless asked for; Weave starts at registration."""

from __future__ import annotations

import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

import art
from art import integrations
from art.integrations import weave as weave_hook

INTEGRATION_MODULES = ("wandb", "weave", "langfuse", "langgraph", "langchain_core", "langchain_openai")

LOG_ONE_STEP = """
import asyncio, sys
import art
model = art.TrainableModel(name="m", project="p", base_model="x", base_path=sys.argv[1], **{kwargs})
trajectory = art.Trajectory(messages_and_choices=[{{"role": "user", "content": "q"}}], reward=1.0)
asyncio.run(model.log([trajectory], split="val", step=0))
import art.integrations
loaded = [name for name in {modules!r} if name in sys.modules]
assert not loaded, loaded
"""


@pytest.mark.parametrize(
    ("kwargs", "api_key"),
    [("{}", None), ("{'report_metrics': []}", "set-but-turned-off")],
    ids=["no-key", "key-with-empty-list"],
)
def test_logging_without_trackers_imports_none_of_them(
    tmp_path: Path, kwargs: str, api_key: str | None
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "WANDB_API_KEY"}
    if api_key:
        env["WANDB_API_KEY"] = api_key
    code = LOG_ONE_STEP.format(kwargs=kwargs, modules=INTEGRATION_MODULES)
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True, env=env)
    assert (tmp_path / "p" / "models" / "m" / "history.jsonl").exists()


class FakeWeave(types.ModuleType):
    """Stands in for the weave package: records `weave.init` calls (the real one needs a W&B login)."""

    def __init__(self) -> None:
        super().__init__("weave")
        self.calls: list[tuple[str, Any]] = []

    def init(self, project_name: str, *, settings: Any = None) -> None:
        self.calls.append((project_name, settings))


async def test_weave_starts_once_per_project_when_a_model_registers(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fake_backend
) -> None:  # type: ignore[no-untyped-def]
    fake = FakeWeave()
    monkeypatch.setitem(sys.modules, "weave", fake)
    monkeypatch.setitem(integrations.PACKAGES, "weave", "json")  # "installed" for the validator
    monkeypatch.setattr(weave_hook, "_initialised", set())

    first = art.TrainableModel(
        name="a",
        project="proj",
        entity="team",
        base_model="x",
        base_path=str(tmp_path),
        report_metrics=["weave"],
    )
    await first.register(fake_backend)
    assert fake.calls == [("team/proj", {"print_call_link": False})]
    await first.log([art.Trajectory(messages_and_choices=[{"role": "user", "content": "q"}])], step=0)
    second = art.TrainableModel(
        name="b",
        project="proj",
        entity="team",
        base_model="x",
        base_path=str(tmp_path),
        report_metrics=["weave"],
    )
    await second.register(type(fake_backend)())
    assert len(fake.calls) == 1  # same project: already tracing

    logged_only = art.Model(name="c", project="other", base_path=str(tmp_path), report_metrics=["weave"])
    await logged_only.log(metrics={"accuracy": 1.0}, step=0)
    assert fake.calls[-1] == ("other", {"print_call_link": False})


def test_weave_without_the_package_gives_the_install_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(integrations.PACKAGES, "weave", "weave_is_not_installed_here")
    with pytest.raises(ValueError, match=r"pip install 'agent-reinforcement-trainer\[weave\]'"):
        art.Model(name="m", project="p", base_path=str(tmp_path), report_metrics=["weave"])
