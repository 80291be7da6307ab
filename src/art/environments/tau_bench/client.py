"""A client of a tau-bench environment server (the reference's `art.tau_bench.client`, same names).

The server (not part of ART) hosts tau-bench's simulated customer-service domains: it lists scenarios
(`GET /scenarios?domain=&split=`), creates an environment for a task (`POST /environments`), steps it with
the agent's action (`POST /environments/{id}/step`: a message to the simulated user, or a tool call written
as `name(arg=value, ...)`) and deletes it (`DELETE /environments/{id}`). Each request carries
`Authorization: Bearer <key>` (`TAU_BENCH_API_KEY`) and an `X-Request-ID` that stays the same across its
retries, so the server can tell a retry from a new request. Transient answers (429, 502, 503, 504) and
connection errors are retried with exponential backoff (`TAU_BENCH_HTTP_STATUS_RETRIES`, default 12;
`..._RETRY_BASE_DELAY` 0.5 s; `..._RETRY_MAX_DELAY` 5 s); any other error status raises
`httpx.HTTPStatusError` with the server's `detail`.

    client = TauBenchClient(base_url="http://tau-bench:8000", api_key="...")
    scenarios = await client.get_scenarios(domain="retail", split="train")
    async with client.environment(domain="retail", task_id=scenarios[0].task.id) as env:
        step = await client.step_environment(env.id, "Hello, how can I help?")
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Literal, Required, TypedDict, Unpack

import httpx
from pydantic import BaseModel

JsonObject = dict[str, Any]
TRANSIENT_STATUS_CODES = frozenset({429, 502, 503, 504})
DEFAULT_STATUS_RETRIES = 12
DEFAULT_RETRY_BASE_DELAY = 0.5
DEFAULT_RETRY_MAX_DELAY = 5.0


class Task(BaseModel):
    """One tau-bench task (the server's fields; only `id` is required)."""

    id: str
    description: JsonObject | str | None = None
    user_scenario: JsonObject | str | None = None
    ticket: str | None = None
    initial_state: JsonObject | None = None
    evaluation_criteria: JsonObject | None = None
    issues: list[JsonObject | str] | None = None
    required_documents: list[str] | None = None
    user_tools: list[str] | None = None


class Scenario(BaseModel):
    """A task in its domain: what `rollout` plays."""

    domain: str
    task: Task


class ScenarioListResponse(BaseModel):
    scenarios: list[Scenario]


class EnvironmentResponse(BaseModel):
    """A new environment: its id, the user's first message, and `info` (the `policy`, the `tools`)."""

    id: str
    observation: str
    info: dict[str, Any]


class StepEnvironmentResponse(EnvironmentResponse):
    """What one action did: the next observation, its reward, and whether the episode ended."""

    reward: float
    terminated: bool
    truncated: bool


class DeleteEnvironmentResponse(BaseModel):
    id: str
    deleted: bool


def _env_number(name: str, default: float) -> float:
    return max(0.0, float(os.getenv(name, default)))


def _raise_for_status(response: httpx.Response) -> None:
    """`raise_for_status`, with the server's `detail` (or body) in the message."""
    if response.is_success:
        return
    detail: Any = response.text
    try:
        body = response.json()
        if isinstance(body, dict) and "detail" in body:
            detail = body["detail"]
    except ValueError:
        pass
    raise httpx.HTTPStatusError(
        f"tau-bench server answered {response.status_code} to {response.request.method} "
        f"{response.request.url.path}: {detail}",
        request=response.request,
        response=response,
    )


class EnvironmentFields(TypedDict, total=False):
    """`TauBenchClient.create_environment`'s arguments, which `TauBenchClient.environment` passes on."""

    domain: Required[str]
    task_id: Required[str]
    user_llm: str | None
    user_llm_args: dict[str, Any] | None
    retrieval_config: str | None
    retrieval_config_kwargs: dict[str, Any] | None
    idle_timeout_seconds: float | None


class TauBenchClient:
    """The environment server's client (see the module docstring). `http_client` replaces the connection
    pool (then `close()` leaves it open); by default one pool of 512 kept-alive connections."""

    def __init__(
        self,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float | httpx.Timeout | None = 300.0,
        limits: httpx.Limits | None = None,
        http_client: httpx.AsyncClient | None = None,
        status_retries: int | None = None,
        retry_base_delay: float | None = None,
        retry_max_delay: float | None = None,
    ) -> None:
        self.api_key = api_key if api_key is not None else os.getenv("TAU_BENCH_API_KEY")
        self.status_retries = (
            int(status_retries)
            if status_retries is not None
            else int(_env_number("TAU_BENCH_HTTP_STATUS_RETRIES", DEFAULT_STATUS_RETRIES))
        )
        self.retry_base_delay = (
            retry_base_delay
            if retry_base_delay is not None
            else _env_number("TAU_BENCH_HTTP_RETRY_BASE_DELAY", DEFAULT_RETRY_BASE_DELAY)
        )
        self.retry_max_delay = (
            retry_max_delay
            if retry_max_delay is not None
            else _env_number("TAU_BENCH_HTTP_RETRY_MAX_DELAY", DEFAULT_RETRY_MAX_DELAY)
        )
        if isinstance(timeout, int | float):  # a number: that long for everything, at most 30 s to connect
            timeout = httpx.Timeout(float(timeout), connect=min(float(timeout), 30.0))
        self._owns_client = http_client is None
        self._client = http_client or httpx.AsyncClient(
            base_url=base_url or os.getenv("TAU_BENCH_BASE_URL") or "http://localhost:8000",
            timeout=timeout,
            transport=httpx.AsyncHTTPTransport(
                limits=limits
                or httpx.Limits(max_connections=512, max_keepalive_connections=512, keepalive_expiry=60.0),
                retries=2,
            ),
        )

    async def close(self) -> None:
        """Close the connection pool this client made (one passed in stays open)."""
        if self._owns_client:
            await self._client.aclose()

    async def __aenter__(self) -> TauBenchClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def get_scenarios(self, *, domain: str | None = None, split: str | None = None) -> list[Scenario]:
        """The scenarios of `domain` (all domains when None) in `split`."""
        params = {k: v for k, v in {"domain": domain, "split": split}.items() if v is not None}
        response = await self._request("GET", "/scenarios", params=params)
        return ScenarioListResponse.model_validate(response.json()).scenarios

    async def create_environment(
        self,
        *,
        domain: str,
        task_id: str,
        user_llm: str | None = None,
        user_llm_args: dict[str, Any] | None = None,
        retrieval_config: str | None = None,
        retrieval_config_kwargs: dict[str, Any] | None = None,
        idle_timeout_seconds: float | None = None,
    ) -> EnvironmentResponse:
        """A new environment for `task_id` (fields left None are not sent)."""
        fields = {
            "domain": domain,
            "task_id": task_id,
            "user_llm": user_llm,
            "user_llm_args": user_llm_args,
            "retrieval_config": retrieval_config,
            "retrieval_config_kwargs": retrieval_config_kwargs,
            "idle_timeout_seconds": idle_timeout_seconds,
        }
        body = {k: v for k, v in fields.items() if v is not None}
        response = await self._request("POST", "/environments", json=body)
        return EnvironmentResponse.model_validate(response.json())

    async def step_environment(self, env_id: str, action: str) -> StepEnvironmentResponse:
        """Take one action in environment `env_id`."""
        response = await self._request("POST", f"/environments/{env_id}/step", json={"action": action})
        return StepEnvironmentResponse.model_validate(response.json())

    async def delete_environment(self, env_id: str) -> DeleteEnvironmentResponse:
        """Delete environment `env_id`."""
        response = await self._request("DELETE", f"/environments/{env_id}")
        return DeleteEnvironmentResponse.model_validate(response.json())

    @asynccontextmanager
    async def environment(self, **fields: Unpack[EnvironmentFields]) -> AsyncIterator[EnvironmentResponse]:
        """An environment deleted when the block ends (however it ends); `fields` as `create_environment`'s."""
        env = await self.create_environment(**fields)
        try:
            yield env
        finally:
            await self.delete_environment(env.id)

    async def _request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        """Send with the key and one request id, retrying transient failures (see the module docstring)."""
        headers = {"X-Request-ID": str(uuid.uuid4())}
        if self.api_key is not None:
            headers["Authorization"] = f"Bearer {self.api_key}"
        attempts = self.status_retries + 1
        for attempt in range(attempts):
            last = attempt == attempts - 1
            try:
                response = await self._client.request(method, url, headers=headers, **kwargs)
            except httpx.TransportError:
                if last:
                    raise
            else:
                if response.status_code not in TRANSIENT_STATUS_CODES or last:
                    _raise_for_status(response)
                    return response
                await response.aclose()
            await asyncio.sleep(min(self.retry_base_delay * 2**attempt, self.retry_max_delay))
        raise AssertionError("unreachable: the last attempt returns or raises")


default_client: TauBenchClient | None = None
"""The client `get_scenarios` and `rollout` use when given none (made on first use; may be replaced)."""


def _get_default_client(client: TauBenchClient | None = None) -> TauBenchClient:
    global default_client
    if client is not None:
        return client
    if default_client is None:
        default_client = TauBenchClient()
    return default_client


async def get_scenarios(
    *,
    domain: Literal["banking_knowledge", "retail", "airline", "telecom", "telecom-workflow", "mock"]
    | str
    | None = None,
    split: Literal["base", "train", "test", "small", "full"] | str | None = None,
    client: TauBenchClient | None = None,
) -> list[Scenario]:
    """`client.get_scenarios(...)` with the module's `default_client` when none is given."""
    return await _get_default_client(client).get_scenarios(domain=domain, split=split)
