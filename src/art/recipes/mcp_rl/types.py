"""What MCP-RL talks about: a server's tools and resources, and the scenarios generated from them.

`MCPTool` and `MCPResource` describe what an MCP server offers (built from the SDK's `list_tools()` /
`list_resources()` results or from plain dicts); `MCPTool.to_tool_schema()` is the OpenAI function-tool
schema a chat model is given. `GeneratedScenario` is one task for the agent with a difficulty from 1 to 5,
and `GeneratedScenarioCollection` a list of them with the helpers a training script needs (split,
shuffle, filter, preview, JSON round trip). Names and methods follow the reference's `art.mcp.types`.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterator
from typing import Any, overload

from pydantic import BaseModel, ConfigDict, Field, StrictInt, field_validator

DEFAULT_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}


class MCPTool(BaseModel):
    """One tool of an MCP server: its name, what it does, and its arguments as a JSON schema.

    Example:
        tool = MCPTool.from_mcp(sdk_tool)          # an `mcp.types.Tool` from `session.list_tools()`
        tool.to_tool_schema()                      # {"type": "function", "function": {...}}
    """

    name: str = Field(min_length=1)
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: dict(DEFAULT_PARAMETERS))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MCPTool:
        """From `{"name", "description", "parameters"}` (an SDK-style `inputSchema` key works too)."""
        parameters = data.get("parameters") or data.get("inputSchema") or dict(DEFAULT_PARAMETERS)
        return cls(
            name=data.get("name", ""), description=data.get("description") or "", parameters=parameters
        )

    @classmethod
    def from_mcp(cls, tool: Any) -> MCPTool:
        """From an `mcp.types.Tool` (SDK 2: `input_schema`; SDK 1 and plain objects: `inputSchema`)."""
        schema = (
            getattr(tool, "input_schema", None)
            or getattr(tool, "inputSchema", None)
            or dict(DEFAULT_PARAMETERS)
        )
        return cls(name=tool.name, description=getattr(tool, "description", None) or "", parameters=schema)

    def to_dict(self) -> dict[str, Any]:
        """`{"name", "description", "parameters"}`."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    def to_tool_schema(self) -> dict[str, Any]:
        """The OpenAI function-tool schema (what `chat.completions.create(tools=[...])` takes).

        A tool without a description gets one naming it, and parameters always have `"type": "object"`
        (some servers omit it), so that every OpenAI-compatible server accepts the schema.
        """
        parameters = dict(self.parameters) if self.parameters else dict(DEFAULT_PARAMETERS)
        parameters.setdefault("type", "object")
        if parameters["type"] == "object":
            parameters.setdefault("properties", {})
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description or f"MCP tool: {self.name}",
                "parameters": parameters,
            },
        }


class MCPResource(BaseModel):
    """One resource of an MCP server (a URI the client may read).

    Example:
        >>> MCPResource(uri="file:///docs/readme.md", name="readme").uri
        'file:///docs/readme.md'
    """

    model_config = ConfigDict(populate_by_name=True)

    uri: str
    name: str = ""
    description: str = ""
    mime_type: str | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MCPResource:
        """From `{"uri", "name", "description", "mimeType" or "mime_type"}`."""
        return cls(
            uri=str(data.get("uri", "")),
            name=data.get("name") or "",
            description=data.get("description") or "",
            mime_type=data.get("mimeType") or data.get("mime_type"),
        )

    @classmethod
    def from_mcp(cls, resource: Any) -> MCPResource:
        """From an `mcp.types.Resource` (its `uri` is a pydantic URL; kept as a string)."""
        return cls(
            uri=str(resource.uri),
            name=getattr(resource, "name", None) or "",
            description=getattr(resource, "description", None) or "",
            mime_type=getattr(resource, "mime_type", None) or getattr(resource, "mimeType", None),
        )

    def to_dict(self) -> dict[str, Any]:
        """`{"uri", "name", "description"}` and `"mimeType"` when known."""
        result: dict[str, Any] = {"uri": self.uri, "name": self.name, "description": self.description}
        if self.mime_type:
            result["mimeType"] = self.mime_type
        return result


def cut_task(task: str, max_length: int = 120) -> str:
    """`task`, cut to `max_length` characters with an ellipsis (one-line previews)."""
    if len(task) <= max_length:
        return task
    return task[:max_length].strip() + "…"


class GeneratedScenario(BaseModel):
    """One task for an agent: what to do, and how hard it is (1: one tool call ... 5: long analysis).

    Example:
        >>> GeneratedScenario(task="List the open issues labelled 'bug'.", difficulty=2).difficulty
        2
    """

    task: str = Field(min_length=1)
    difficulty: StrictInt = Field(ge=1, le=5)

    @field_validator("task")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("task must not be blank")
        return value

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GeneratedScenario:
        """From `{"task", "difficulty"}`; raises a ValueError naming the bad field."""
        return cls.model_validate(data)

    def to_dict(self) -> dict[str, Any]:
        """`{"task", "difficulty"}`."""
        return {"task": self.task, "difficulty": self.difficulty}

    def preview(self, max_length: int = 120) -> str:
        """The task, cut to `max_length` characters with an ellipsis."""
        return cut_task(self.task, max_length)


class GeneratedScenarioCollection:
    """Scenarios with the helpers a training script needs.

    Example:
        train, val = collection.shuffle(seed=0).split(train_size=16)
    """

    def __init__(self, scenarios: list[GeneratedScenario]) -> None:
        self.scenarios = list(scenarios)

    @classmethod
    def from_dicts(cls, data: list[dict[str, Any]]) -> GeneratedScenarioCollection:
        """From a list of `{"task", "difficulty"}` dicts."""
        return cls([GeneratedScenario.from_dict(item) for item in data])

    @classmethod
    def from_json(cls, json_str: str) -> GeneratedScenarioCollection:
        """From `{"scenarios": [...]}` or a bare list."""
        data = json.loads(json_str)
        items = data["scenarios"] if isinstance(data, dict) and "scenarios" in data else data
        if not isinstance(items, list):
            raise ValueError('expected {"scenarios": [...]} or a JSON list of scenarios')
        return cls.from_dicts(items)

    def to_dicts(self) -> list[dict[str, Any]]:
        """Every scenario as a dict."""
        return [s.to_dict() for s in self.scenarios]

    def to_json(self, indent: int | None = None) -> str:
        """`{"scenarios": [...]}` as JSON."""
        return json.dumps({"scenarios": self.to_dicts()}, indent=indent)

    def __len__(self) -> int:
        return len(self.scenarios)

    def __iter__(self) -> Iterator[GeneratedScenario]:
        return iter(self.scenarios)

    @overload
    def __getitem__(self, index: int) -> GeneratedScenario: ...
    @overload
    def __getitem__(self, index: slice) -> list[GeneratedScenario]: ...
    def __getitem__(self, index: int | slice) -> GeneratedScenario | list[GeneratedScenario]:
        return self.scenarios[index]

    def __repr__(self) -> str:
        return f"GeneratedScenarioCollection({len(self)} scenarios)"

    def shuffle(self, seed: int | None = None) -> GeneratedScenarioCollection:
        """A new collection in shuffled order (seeded when `seed` is given)."""
        shuffled = list(self.scenarios)
        random.Random(seed).shuffle(shuffled)
        return GeneratedScenarioCollection(shuffled)

    def split(self, train_size: int) -> tuple[GeneratedScenarioCollection, GeneratedScenarioCollection]:
        """(the first `train_size` scenarios, the rest): disjoint train and validation sets."""
        if not 0 <= train_size <= len(self.scenarios):
            raise ValueError(
                f"train_size ({train_size}) must be between 0 and the number of scenarios ({len(self.scenarios)})"
            )
        return (
            GeneratedScenarioCollection(self.scenarios[:train_size]),
            GeneratedScenarioCollection(self.scenarios[train_size:]),
        )

    def filter_by_difficulty(
        self, min_difficulty: int = 1, max_difficulty: int = 5
    ) -> GeneratedScenarioCollection:
        """The scenarios whose difficulty is within [min_difficulty, max_difficulty]."""
        return GeneratedScenarioCollection(
            [s for s in self.scenarios if min_difficulty <= s.difficulty <= max_difficulty]
        )

    def get_difficulty_distribution(self) -> Counter[int]:
        """How many scenarios there are of each difficulty."""
        return Counter(s.difficulty for s in self.scenarios)

    def preview_lines(self, n: int = 5, max_task_length: int = 120) -> list[str]:
        """The first `n` scenarios as numbered one-line previews."""
        return [
            f"   {i + 1}. {s.preview(max_task_length)}  (difficulty {s.difficulty}/5)"
            for i, s in enumerate(self.scenarios[:n])
        ]

    def preview(self, n: int = 5, max_task_length: int = 120) -> None:
        """Print the first `n` scenarios."""
        for line in self.preview_lines(n, max_task_length):
            print(line)

    def difficulty_lines(self) -> list[str]:
        """The difficulty distribution as five text bars."""
        counts = self.get_difficulty_distribution()
        return [f"   {d}/5: {counts.get(d, 0):3d}  {'█' * min(counts.get(d, 0), 30)}" for d in range(1, 6)]

    def print_difficulty_distribution(self) -> None:
        """Print the difficulty distribution."""
        print("Difficulty distribution:")
        for line in self.difficulty_lines():
            print(line)

    def get_summary(self) -> dict[str, Any]:
        """Count, difficulty distribution, mean difficulty and mean task length."""
        n = len(self.scenarios)
        return {
            "total_scenarios": n,
            "difficulty_distribution": dict(self.get_difficulty_distribution()),
            "avg_difficulty": sum(s.difficulty for s in self.scenarios) / n if n else 0,
            "avg_task_length": sum(len(s.task) for s in self.scenarios) / n if n else 0,
        }
