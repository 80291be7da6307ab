"""The reference's MCP types: tools and resources from SDK objects and dicts, scenarios validated, and the
collection's helpers."""

from __future__ import annotations

import mcp.types
import pytest

from art.mcp import GeneratedScenario, GeneratedScenarioCollection, MCPResource, MCPTool, complete_task_tool


def test_tools_and_resources_from_the_sdk_and_from_dicts() -> None:
    sdk_tool = mcp.types.Tool(
        name="add", description=None, input_schema={"properties": {"a": {"type": "integer"}}}
    )
    tool = MCPTool.from_mcp(sdk_tool)
    schema = tool.to_tool_schema()
    assert schema["function"]["description"] == "MCP tool: add"  # servers may omit it; OpenAI needs text
    assert schema["function"]["parameters"] == {"properties": {"a": {"type": "integer"}}, "type": "object"}
    assert (
        MCPTool.from_dict({"name": "x", "inputSchema": {"type": "object", "properties": {}}}).parameters[
            "type"
        ]
        == "object"
    )
    assert MCPTool.from_dict(tool.to_dict()) == tool
    resource = MCPResource.from_mcp(
        mcp.types.Resource(name="f", uri="mailbox://folders", mime_type="text/plain")
    )
    assert resource.to_dict() == {
        "uri": "mailbox://folders",
        "name": "f",
        "description": "",
        "mimeType": "text/plain",
    }
    assert MCPResource.from_dict(resource.to_dict()) == resource
    assert complete_task_tool.to_tool_schema()["function"]["parameters"]["required"] == ["summary"]


def test_scenarios_are_validated_and_the_collection_splits_disjointly() -> None:
    with pytest.raises(ValueError, match="difficulty"):
        GeneratedScenario(task="x", difficulty=6)
    with pytest.raises(ValueError, match="difficulty"):
        GeneratedScenario.from_dict({"task": "x", "difficulty": "3"})  # strict: an integer
    with pytest.raises(ValueError, match="blank"):
        GeneratedScenario(task="   ", difficulty=1)
    collection = GeneratedScenarioCollection.from_dicts(
        [{"task": f"t{i}", "difficulty": 1 + i % 5} for i in range(10)]
    )
    assert GeneratedScenarioCollection.from_json(collection.to_json()).to_dicts() == collection.to_dicts()
    train, val = collection.shuffle(seed=3).split(train_size=7)
    assert len(train) == 7 and len(val) == 3 and not {s.task for s in train} & {s.task for s in val}
    assert collection.shuffle(seed=3).to_dicts() == collection.shuffle(seed=3).to_dicts()
    with pytest.raises(ValueError, match="train_size"):
        collection.split(11)
    assert len(collection.filter_by_difficulty(4, 5)) == 4
    assert collection.get_summary()["difficulty_distribution"] == {1: 2, 2: 2, 3: 2, 4: 2, 5: 2}
    assert GeneratedScenario(task="a" * 200, difficulty=1).preview(10) == "aaaaaaaaaa…"


def test_the_ruler_loop_packages_stay_on_the_client_side() -> None:
    """`art.mcp`, `art.recipes.autorl` and `art.recipes.ruler_loop` load no torch, engine, trainer or service (a fresh
    interpreter): a user's MCP-RL or AutoRL script talks to a backend, wherever it runs."""
    import json
    import subprocess
    import sys

    code = (
        "import art.mcp, art.recipes.mcp_rl.episode, art.recipes.autorl, art.recipes.ruler_loop.loop, sys, json; "
        "print(json.dumps(sorted(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    modules = json.loads(done.stdout.strip().splitlines()[-1])
    # (The MCP SDK itself brings starlette and uvicorn; those are its business.)
    heavy = [m for m in modules if m.split(".")[0] in ("torch", "transformers", "peft")]
    heavy_side = ("art.engines", "art.service", "art.training")  # packages: art.training_input is client side
    ours = [m for m in modules if any(m == p or m.startswith(p + ".") for p in heavy_side)]
    assert heavy == [] and ours == [], (heavy, ours)
