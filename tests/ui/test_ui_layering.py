"""`art show` and `art ui` read a record on a light install: no torch, no trainer, no engine (checked in a
fresh interpreter)."""

from __future__ import annotations

from test_layering import _beyond_art, _modules_after, _ours


def test_reading_a_record_imports_no_torch_and_nothing_of_the_service() -> None:
    modules = _modules_after("import art.ui.show, art.ui.record, art.ui.conversation, art.ui.pages")
    heavy = [m for m in ("torch", "transformers", "peft", "fastapi", "uvicorn") if m in modules]
    assert heavy == [], f"art show loaded {heavy}"
    beyond = _beyond_art("import art.ui.show, art.ui.record, art.ui.conversation, art.ui.pages")
    for below in ("art.service", "art.engines", "art.training", "art.backends"):
        assert _ours(beyond, below) == [], _ours(beyond, below)


def test_the_web_app_imports_no_torch() -> None:
    modules = _modules_after("import art.ui.app")
    assert "fastapi" in modules and "torch" not in modules and _ours(modules, "art.training") == []
