"""Langfuse: each logged trajectory becomes a trace with a reward score, sent to a real HTTP endpoint.

A local server on 127.0.0.1 stands in for Langfuse and keeps what the real `langfuse` client sends:
spans as OTLP (gzip'd protobuf, decoded with OpenTelemetry's own message classes) and scores as JSON.
"""

from __future__ import annotations

import gzip
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import art

pytest.importorskip("langfuse", reason="needs the `langfuse` extra: pip install -e '.[langfuse]'")


class Received:
    def __init__(self) -> None:
        self.requests: list[tuple[str, bytes]] = []

    def spans(self) -> list[tuple[str, dict[str, Any]]]:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        out = []
        for path, body in self.requests:
            if path.endswith("/otel/v1/traces"):
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                for resource in request.resource_spans:
                    for scope in resource.scope_spans:
                        for span in scope.spans:
                            attributes: dict[str, Any] = {}
                            for a in span.attributes:
                                values = a.value.array_value.values
                                attributes[a.key] = (
                                    [v.string_value for v in values] if values else a.value.string_value
                                )
                            out.append((span.name, attributes))
        return out

    def scores(self) -> list[dict[str, Any]]:
        return [s for path, body in self.requests if path.endswith("/scores") for s in json.loads(body)]


@pytest.fixture(scope="module")
def _langfuse_server() -> Iterator[Received]:
    """One server for the module: `langfuse.get_client()` keeps the first address it was given."""
    received = Received()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", 0)))
            if self.headers.get("content-encoding") == "gzip":
                body = gzip.decompress(body)
            received.requests.append((self.path, body))
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with pytest.MonkeyPatch.context() as env:
        env.setenv("LANGFUSE_PUBLIC_KEY", "pk-lf-local-test")
        env.setenv("LANGFUSE_SECRET_KEY", "sk-lf-local-test")
        env.setenv("LANGFUSE_BASE_URL", f"http://127.0.0.1:{server.server_address[1]}")
        yield received
    server.shutdown()


@pytest.fixture
def langfuse_server(_langfuse_server: Received) -> Received:
    """The module's server, with what earlier tests sent forgotten."""
    _langfuse_server.requests.clear()
    return _langfuse_server


async def test_each_logged_trajectory_becomes_a_scored_trace(
    langfuse_server: Received, tmp_path: Path
) -> None:
    model = art.Model(name="agent", project="lf", base_path=str(tmp_path), report_metrics=["langfuse"])
    answered = art.Trajectory(
        messages_and_choices=[{"role": "user", "content": "Q1"}, {"role": "assistant", "content": "A1"}],
        reward=0.25,
        metrics={"turns": 1},
    )
    unanswered = art.Trajectory(messages_and_choices=[{"role": "user", "content": "Q2"}], reward=1.0)
    await model.log([art.TrajectoryGroup([answered, unanswered])], split="val", step=3)

    spans = langfuse_server.spans()
    assert [name for name, _ in spans] == ["rollout", "rollout"]
    first, second = (attributes for _, attributes in spans)
    assert first["langfuse.trace.name"] == "agent val rollout"
    assert first["langfuse.trace.tags"] == ["val", "step:3", "model:lf/agent"]
    assert json.loads(first["langfuse.observation.input"])["messages"] == [{"role": "user", "content": "Q1"}]
    assert json.loads(first["langfuse.observation.output"]) == {"role": "assistant", "content": "A1"}
    assert json.loads(first["langfuse.observation.metadata.metrics"]) == {"turns": 1}
    assert json.loads(second["langfuse.observation.input"])["messages"] == [{"role": "user", "content": "Q2"}]
    assert sorted((s["name"], s["value"]) for s in langfuse_server.scores()) == [
        ("reward", 0.25),
        ("reward", 1.0),
    ]

    langfuse_server.requests.clear()
    await model.log(metrics={"accuracy": 1.0}, split="val", step=4)  # no trajectories: no trace
    assert langfuse_server.requests == []


async def test_a_resumed_model_continues_its_langfuse_session(
    langfuse_server: Received, tmp_path: Path
) -> None:
    def logged_session(model: art.Model) -> str:
        ((_, attributes),) = langfuse_server.spans()
        langfuse_server.requests.clear()
        return str(attributes["session.id"])

    trajectory = art.Trajectory(messages_and_choices=[{"role": "user", "content": "Q"}], reward=1.0)
    first = art.Model(name="agent", project="lf", base_path=str(tmp_path / "a"), report_metrics=["langfuse"])
    await first.log([art.TrajectoryGroup([trajectory])], split="train", step=1)
    session = logged_session(first)
    resumed = art.Model(
        name="agent", project="lf", base_path=str(tmp_path / "a"), report_metrics=["langfuse"]
    )
    await resumed.log([art.TrajectoryGroup([trajectory])], split="train", step=2)
    assert (
        logged_session(resumed)
        == session
        == json.loads(first.storage.trackers_path.read_text())["langfuse"]["session_id"]
    )
    other = art.Model(name="agent", project="lf", base_path=str(tmp_path / "b"), report_metrics=["langfuse"])
    await other.log([art.TrajectoryGroup([trajectory])], split="train", step=1)
    assert logged_session(other) != session  # another record: another session
