"""Fixtures of the LangGraph tests: ART's real server in front of a prompt-scripted engine."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("langgraph", reason="needs the `langgraph` extra: pip install -e '.[langgraph]'")
pytest.importorskip("fastapi", reason="needs the `local` extra: pip install -e '.[local]'")

from scripted_engine import KEY, PromptScriptedEngine, ScriptedServer


@pytest.fixture(scope="module")
def scripted_server(tiny_model_path: Path) -> Iterator[ScriptedServer]:
    from art.openai_server.http import ServerThread, create_app

    engine = PromptScriptedEngine(tiny_model_path)  # only its tokenizer is used
    server = ServerThread(create_app(engine, api_key=KEY))  # type: ignore[arg-type]
    url = server.start()
    yield ScriptedServer(engine, url)
    server.stop()
