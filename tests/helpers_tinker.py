"""Shared by tests/hub's Tinker API tests (importable from every test folder, as tests/helpers_*.py are)."""

COOKBOOK_MODEL = "Qwen/Qwen3-4B-Instruct-2507"
"""A name tinker-cookbook knows (renderer qwen3_instruct: ChatML, as the tiny model's template); `art serve
--tinker-model` serves the tiny model under it in tests/hub/conftest.py."""
