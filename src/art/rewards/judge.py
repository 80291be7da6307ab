"""Judges: who answers RULER's question, how to reach them, and how hard to try.

A judge is named either by a LiteLLM model string (`"openai/o4-mini"`, `"anthropic/..."`, `"ollama/..."`,
needs the optional `judge` extra), or by a `Judge` spec. A `Judge` with a `base_url` talks to any
OpenAI-compatible endpoint through the official `openai.AsyncOpenAI` client, so a fully local, offline
judge works, including a model served by ART's own server:

    Judge(model="qwen3-8b", base_url="http://127.0.0.1:8000/v1", api_key="...")

`ask_judge` sends one prompt and returns the parsed answer. It retries, with bounded exponential backoff,
what is worth retrying: timeouts, rate limits (429, honouring Retry-After), server errors and dropped
connections (`RetryPolicy.max_attempts`); and, immediately, answers that fail validation, telling the
judge what was wrong (`RetryPolicy.max_invalid_answers`). If the endpoint refuses the `json_schema`
response format (400/422) it falls back to `json_object`, then to none; the answer is validated either way.
Every failure ends in a `JudgeError` subclass whose message says what happened and what to do.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import random
from collections.abc import Callable, Sequence
from typing import Any, Literal, Protocol, TypeAlias, TypeVar

import httpx
import openai
from pydantic import BaseModel, ConfigDict, Field, field_validator

from art.common.offline_litellm import import_litellm
from art.common.waits import waiting

logger = logging.getLogger("art.rewards")

T = TypeVar("T")
ResponseFormatMode = Literal["json_schema", "json_object", "none"]
JUDGE_EXTRA_HINT = "pip install 'agent-reinforcement-trainer[judge]'"


# ---- errors ----------------------------------------------------------------------------------------------
class JudgeError(RuntimeError):
    """Base class of every judge failure; `judge` names the judge.

    Example:
        try:
            group = await ruler_score_group(group, "openai/o4-mini")
        except JudgeError as error:
            print(error.judge, error)
    """

    def __init__(self, message: str, *, judge: str = "") -> None:
        super().__init__(message)
        self.judge = judge


class JudgeConfigError(JudgeError, ValueError):
    """The judge cannot be used as given (unknown model string, litellm missing, bad spec).

    Example:
        try:
            await ruler(lists, "no-such-provider/model")
        except JudgeConfigError as error:
            print(error)  # says which model string or extra is wrong
    """


class JudgeUnavailableError(JudgeError):
    """Timeouts, rate limits, server errors or dropped connections outlasted the retry budget.

    Example:
        try:
            await ruler(lists, judge)
        except JudgeUnavailableError:
            ...  # retry later, or pass swallow_exceptions=True to ruler_score_group
    """


class JudgeRequestError(JudgeError):
    """The endpoint refused the request outright (bad key, unknown model, bad request).

    Example:
        try:
            await ruler(lists, Judge(model="gpt-4.1", base_url=url, api_key="wrong"))
        except JudgeRequestError as error:
            print(error)  # e.g. the 401 and what the endpoint said
    """


class JudgeContextError(JudgeRequestError):
    """The prompt was longer than the judge's context window. RULER catches it, cuts the group's longest
    messages to fit (`art.rewards.fit`) and asks again; it reaches you only when nothing more can be cut.

    Example:
        try:
            await ruler(lists, judge)
        except JudgeContextError as error:
            print(error.endpoint_message)  # what the endpoint said, e.g. its context length
    """

    def __init__(self, message: str, *, judge: str = "", endpoint_message: str = "") -> None:
        super().__init__(message, judge=judge)
        self.endpoint_message = endpoint_message


class JudgeAnswerError(JudgeError, ValueError):
    """Every answer the judge gave failed validation (not JSON, wrong ids, scores out of range ...).

    Example:
        try:
            await ruler(lists, judge)
        except JudgeAnswerError as error:
            print(error.problems, error.last_answer)
    """

    def __init__(self, message: str, *, judge: str = "", problems: list[str], last_answer: str) -> None:
        super().__init__(message, judge=judge)
        self.problems = problems
        self.last_answer = last_answer


class InvalidAnswer(ValueError):
    """Raised by a parse function: the answer is unusable, for the listed reasons.

    Example:
        def parse(answer: str | None) -> list[str]:
            if not answer:
                raise InvalidAnswer(["the answer is empty"])
            return answer.splitlines()
    """

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


# ---- the spec --------------------------------------------------------------------------------------------
class RetryPolicy(BaseModel):
    """How hard one judgement tries before giving up (each bound is a count of requests).

    Example:
        judge = Judge(model="openai/o4-mini", retry=RetryPolicy(max_attempts=3, max_delay=10.0))
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_attempts: int = Field(
        default=5, ge=1, description="Requests in all when they time out, are rate limited or fail (5xx)."
    )
    max_invalid_answers: int = Field(
        default=2, ge=0, description="Extra requests after answers that fail validation."
    )
    initial_delay: float = Field(default=1.0, ge=0, description="Seconds before the first retry.")
    multiplier: float = Field(default=2.0, ge=1)
    max_delay: float = Field(default=30.0, ge=0, description="Cap on one wait, Retry-After included.")
    jitter: float = Field(default=0.1, ge=0, le=1, description="Random extra fraction of each wait.")

    def delay(self, failures: int, retry_after: float | None = None) -> float:
        """Seconds to wait after the `failures`-th transient failure (1-based)."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_delay)
        base = min(self.initial_delay * self.multiplier ** (failures - 1), self.max_delay)
        return base * (1 + self.jitter * random.random())


class Judge(BaseModel):
    """A judge model and how to reach it.

    With `base_url`: any OpenAI-compatible endpoint (official `openai` client). Without: `model` is a
    LiteLLM model string (needs the `judge` extra). `params` are extra request fields (temperature,
    max_tokens, reasoning_effort ...). The API key never enters cache keys, logs or repr.

    Example:
        judge = Judge(model="qwen3-8b", base_url="http://127.0.0.1:8000/v1", params={"temperature": 0})
        group = await art.rewards.ruler_score_group(group, judge)
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = Field(min_length=1, description="Model name at the endpoint, or a LiteLLM model string.")
    base_url: str | None = Field(default=None, description="e.g. http://127.0.0.1:8000/v1")
    api_key: str | None = Field(default=None, repr=False, exclude=True)
    params: dict[str, Any] = Field(default_factory=dict)
    timeout: float = Field(default=120.0, gt=0, description="Seconds one request may take.")
    response_format: ResponseFormatMode = "json_schema"
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    name: str | None = Field(default=None, description="Label in logs and metrics (default: model).")
    max_explanation_chars: int | None = Field(
        default=None,
        gt=0,
        description="Ask for a bounded answer: exactly one score per trajectory, in order, each explanation "
        "at most this many characters (JSON schema prefixItems, const, maxLength). For small judges that "
        "ramble or stop early; the endpoint must enforce those keywords (ours and vLLM's do).",
    )

    max_prompt_chars: int | None = Field(
        default=None,
        gt=0,
        description="Cut each RULER prompt to about this many characters (the group's longest message "
        "texts, tool results first, keep their beginning and end around a note) before it is sent. None: "
        "send it whole, and cut only if the judge refuses it as longer than its context.",
    )

    @field_validator("base_url")
    @classmethod
    def _strip_slash(cls, value: str | None) -> str | None:
        return value.rstrip("/") if value else value

    @property
    def label(self) -> str:
        """A short readable name: `name`, else `model` (with the endpoint when there is one)."""
        if self.name:
            return self.name
        return f"{self.model} @ {self.base_url}" if self.base_url else self.model

    @property
    def uses_litellm(self) -> bool:
        """True when requests go through LiteLLM (no base_url)."""
        return self.base_url is None

    def cache_identity(self) -> dict[str, Any]:
        """What makes two judges the same judge for the cache (never the API key)."""
        identity: dict[str, Any] = {"model": self.model, "base_url": self.base_url, "params": self.params}
        if self.max_explanation_chars is not None:
            identity["max_explanation_chars"] = self.max_explanation_chars
        return identity


JudgeLike: TypeAlias = str | Judge
"""A LiteLLM model string or a `Judge`; accepted wherever `judge_model` is."""


def resolve_judges(
    judge_model: JudgeLike | Sequence[JudgeLike], extra_litellm_params: dict[str, Any] | None = None
) -> list[Judge]:
    """One `Judge` per given judge (a list means an ensemble); `extra_litellm_params` go to each.

    A judge's own `params` win over `extra_litellm_params` where both set the same field.
    """
    items: list[Any] = [judge_model] if isinstance(judge_model, str | Judge) else list(judge_model)
    if not items:
        raise JudgeConfigError("judge_model is an empty list: give at least one judge")
    extra = dict(extra_litellm_params or {})
    judges: list[Judge] = []
    for item in items:
        if isinstance(item, Judge):
            judges.append(item.model_copy(update={"params": {**extra, **item.params}}) if extra else item)
        elif isinstance(item, str) and item.strip():
            judges.append(Judge(model=item.strip(), params=extra))
        else:
            raise JudgeConfigError(
                f"judge_model must be a LiteLLM model string such as 'openai/o4-mini' or an "
                f"art.rewards.Judge(model=..., base_url=..., api_key=...), got {item!r}"
            )
    return judges


# ---- transports ------------------------------------------------------------------------------------------
ResponseHook = Callable[[Any], None]
"""Sees every raw response of a transport (e.g. to price it: RULER adds its judge's cost)."""


class Transport(Protocol):
    """Sends one chat request and returns the answer's text (None when there is none)."""

    async def complete(
        self, messages: list[dict[str, Any]], response_format: dict[str, Any] | None
    ) -> str | None: ...

    async def aclose(self) -> None: ...


class OpenAITransport:
    """Any OpenAI-compatible endpoint, through `openai.AsyncOpenAI` (its own retries off: ours apply)."""

    def __init__(self, judge: Judge, *, on_response: ResponseHook | None = None) -> None:
        assert judge.base_url is not None
        self.judge = judge
        self.on_response = on_response
        # A local server needs no key; never fall back to OPENAI_API_KEY, which would send a real
        # provider's key to whatever base_url says.
        self.client = openai.AsyncOpenAI(
            base_url=judge.base_url,
            api_key=judge.api_key or "not-needed",
            timeout=judge.timeout,
            max_retries=0,
        )

    async def complete(
        self, messages: list[dict[str, Any]], response_format: dict[str, Any] | None
    ) -> str | None:
        kwargs: dict[str, Any] = dict(self.judge.params)
        if response_format is not None:
            kwargs["response_format"] = response_format
        response = await self.client.chat.completions.create(
            model=self.judge.model,
            messages=messages,  # type: ignore[arg-type]
            **kwargs,
        )
        if self.on_response is not None:
            self.on_response(response)
        if not response.choices:
            return None
        return response.choices[0].message.content

    async def served_models(self) -> list[str] | None:
        """The model names the endpoint lists (GET /models), or None when it cannot say."""
        try:
            page = await self.client.models.list(timeout=min(self.judge.timeout, 5.0))
            return [m.id for m in page.data]
        except Exception:
            return None

    async def aclose(self) -> None:
        await self.client.close()


def _import_litellm(judge: Judge) -> Any:
    if importlib.util.find_spec("litellm") is None:
        raise JudgeConfigError(
            f"judge_model={judge.model!r} is a LiteLLM model string, but litellm is not installed. "
            f"Install it with `{JUDGE_EXTRA_HINT}`, or reach any OpenAI-compatible endpoint without it: "
            "art.rewards.Judge(model='<name>', base_url='http://host:port/v1', api_key='...')",
            judge=judge.label,
        )
    # Imported offline: otherwise importing litellm downloads a price table (and stalls when offline).
    return import_litellm()


class LiteLLMTransport:
    """Any provider LiteLLM knows, by model string (`openai/o4-mini`, `anthropic/...`, `ollama/...`)."""

    def __init__(
        self,
        judge: Judge,
        *,
        acompletion: Callable[..., Any] | None = None,
        on_response: ResponseHook | None = None,
    ) -> None:
        self.judge = judge
        self.litellm = _import_litellm(judge)
        # `litellm.acompletion` unless the caller routes it (RULER goes through its module's `acompletion`)
        self.acompletion = acompletion if acompletion is not None else self.litellm.acompletion
        self.on_response = on_response
        try:
            self.litellm.get_llm_provider(model=judge.model)
        except Exception as exc:
            raise JudgeConfigError(
                f"unknown judge model {judge.model!r}: LiteLLM cannot tell which provider serves it "
                f"({str(exc).splitlines()[0][:200]}). Write it as 'provider/model', e.g. 'openai/o4-mini', "
                "'anthropic/claude-sonnet-4-5' or 'ollama/qwen3:8b', or use "
                "art.rewards.Judge(model=..., base_url=..., api_key=...) for an OpenAI-compatible endpoint.",
                judge=judge.label,
            ) from None

    async def complete(
        self, messages: list[dict[str, Any]], response_format: dict[str, Any] | None
    ) -> str | None:
        kwargs: dict[str, Any] = {"timeout": self.judge.timeout, "num_retries": 0, "caching": False}
        if self.judge.api_key:
            kwargs["api_key"] = self.judge.api_key
        kwargs.update(self.judge.params)
        if response_format is not None:
            kwargs["response_format"] = response_format
        response = await self.acompletion(model=self.judge.model, messages=messages, **kwargs)
        if self.on_response is not None:
            self.on_response(response)
        choices = getattr(response, "choices", None) or []
        if not choices:
            return None
        content = choices[0].message.content
        return content if isinstance(content, str) else None

    async def aclose(self) -> None:
        return None


def make_transport(
    judge: Judge, *, acompletion: Callable[..., Any] | None = None, on_response: ResponseHook | None = None
) -> Transport:
    """The transport for `judge` (raises JudgeConfigError when it cannot be used); `acompletion` replaces
    `litellm.acompletion` for a LiteLLM judge, `on_response` sees every raw response."""
    if judge.base_url is not None:
        return OpenAITransport(judge, on_response=on_response)
    return LiteLLMTransport(judge, acompletion=acompletion, on_response=on_response)


# ---- classifying failures ---------------------------------------------------------------------------------
ErrorKind = Literal["transient", "format", "fatal"]


def _status(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def classify_error(exc: BaseException) -> ErrorKind:
    """transient: retry after a wait; format: maybe the response_format was refused; fatal: give up."""
    if isinstance(
        exc, openai.APIConnectionError | httpx.TransportError | asyncio.TimeoutError | TimeoutError
    ):
        return "transient"  # includes openai.APITimeoutError and litellm's Timeout / connection errors
    if isinstance(exc, openai.RateLimitError):
        return "transient"
    status = _status(exc)
    if status is not None:
        if status in (408, 409, 425, 429) or status >= 500:
            return "transient"
        if status in (400, 422) and not is_context_overflow(exc):
            return "format"
    return "fatal"


def is_context_overflow(exc: BaseException) -> bool:
    """Whether the endpoint refused a prompt longer than the judge's context (no response_format helps)."""
    if getattr(exc, "code", None) == "context_length_exceeded":
        return True
    text = str(exc).lower()
    return "context length" in text or "context window" in text or "context_length_exceeded" in text


def retry_after_seconds(exc: BaseException) -> float | None:
    """The Retry-After header of a rate-limit answer, in seconds, when it is a number."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    value = headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _describe(exc: BaseException) -> str:
    status = _status(exc)
    text = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
    return f"{type(exc).__name__}{f' (HTTP {status})' if status else ''}: {text}"


def response_format_payload(mode: ResponseFormatMode, schema: dict[str, Any] | None) -> dict[str, Any] | None:
    """The `response_format` request field for a mode (None: send none)."""
    if mode == "json_schema" and schema is not None:
        return {"type": "json_schema", "json_schema": schema}
    if mode in ("json_schema", "json_object"):
        return {"type": "json_object"}
    return None


_DOWNGRADE: dict[ResponseFormatMode, ResponseFormatMode] = {
    "json_schema": "json_object",
    "json_object": "none",
}


# ---- one judgement -----------------------------------------------------------------------------------------
async def ask_judge(
    judge: Judge,
    messages: list[dict[str, Any]],
    parse: Callable[[str | None], T],
    *,
    schema: dict[str, Any] | None = None,
    on_answer: Callable[[int, str | None], None] | None = None,
    transport: Transport | None = None,
    acompletion: Callable[..., Any] | None = None,
    on_response: ResponseHook | None = None,
) -> T:
    """Send `messages` to `judge` and return `parse(answer)`, retrying within `judge.retry`.

    `parse` raises `InvalidAnswer` for an unusable answer; the judge is then shown its answer and the
    problems and asked again. `schema` is an OpenAI `json_schema` object (name, schema, strict) used as
    response_format where the endpoint accepts it. `on_answer(request_number, text)` sees every raw answer;
    `acompletion` and `on_response` go to the transport made here (see `make_transport`).
    """
    policy = judge.retry
    own_transport = transport is None
    active = (
        transport
        if transport is not None
        else make_transport(judge, acompletion=acompletion, on_response=on_response)
    )
    mode: ResponseFormatMode = judge.response_format
    conversation = list(messages)
    transient_failures = 0
    invalid_answers = 0
    requests = 0
    problems: list[str] = []
    try:
        while True:
            requests += 1
            try:
                # A slow judge says so after ~2 s (and every 30 s); its timeouts and retries are warnings.
                with waiting(f"judge {judge.label}: waiting for its answer (request {requests})", every=30):
                    answer = await active.complete(conversation, response_format_payload(mode, schema))
            except Exception as exc:
                kind = classify_error(exc)
                if kind == "format" and mode != "none":
                    new_mode = _DOWNGRADE[mode]
                    logger.warning(
                        "judge %s refused the request with response_format=%s (%s); retrying with %s",
                        judge.label,
                        mode,
                        _describe(exc),
                        new_mode,
                    )
                    mode = new_mode
                    continue
                if kind == "transient":
                    transient_failures += 1
                    if transient_failures >= policy.max_attempts:
                        raise _unavailable(judge, transient_failures, exc) from exc
                    wait = policy.delay(transient_failures, retry_after_seconds(exc))
                    logger.warning(
                        "judge %s: %s; retry %d/%d in %.2fs",
                        judge.label,
                        _describe(exc),
                        transient_failures,
                        policy.max_attempts - 1,
                        wait,
                    )
                    await asyncio.sleep(wait)
                    continue
                raise await _refusal(judge, exc, active) from exc
            if on_answer is not None:
                on_answer(requests, answer)
            try:
                return parse(answer)
            except InvalidAnswer as bad:
                problems = bad.problems
                invalid_answers += 1
                shown = (answer or "")[:2000]
                if invalid_answers > policy.max_invalid_answers:
                    raise _unusable(judge, invalid_answers, problems, answer) from None
                logger.warning(
                    "judge %s: unusable answer (%s); asking again", judge.label, "; ".join(problems)
                )
                conversation = [
                    *messages,
                    {"role": "assistant", "content": shown},
                    {
                        "role": "user",
                        "content": "That answer could not be used: "
                        + "; ".join(problems)
                        + ". Answer again with only the JSON object described above.",
                    },
                ]
    finally:
        if own_transport:
            await active.aclose()


def _unavailable(judge: Judge, failures: int, exc: Exception) -> JudgeUnavailableError:
    """The error once `judge` failed `failures` times in a row for a transient reason (`exc` the last)."""
    return JudgeUnavailableError(
        f"judge {judge.label} failed {failures} times in a row (timeouts, rate "
        f"limits or server errors); the last: {_describe(exc)}. Scores already obtained "
        "stay in the judge cache (unless cache=False), so running again resumes. To get "
        "through, "
        "wait and retry, lower concurrency, raise Judge(timeout=...) for a slow judge, or "
        "allow more attempts with Judge(retry=RetryPolicy(max_attempts=...)).",
        judge=judge.label,
    )


def _unusable(judge: Judge, answers: int, problems: list[str], answer: str | None) -> JudgeAnswerError:
    """The error once `judge` gave `answers` unusable answers (the last `answer`, with its `problems`)."""
    shown = (answer or "")[:2000]
    return JudgeAnswerError(
        f"judge {judge.label} gave {answers} unusable answer(s); the last one: "
        f"{'; '.join(problems)}. Its text began: {shown[:300]!r}. Use a judge that can "
        "follow a JSON schema (a stronger model, or an endpoint that supports "
        "response_format json_schema), or allow more tries with "
        "Judge(retry=RetryPolicy(max_invalid_answers=...)).",
        judge=judge.label,
        problems=problems,
        last_answer=answer or "",
    )


async def _refusal(judge: Judge, exc: Exception, transport: Transport) -> JudgeError:
    """The error for a request `judge` refused for good (neither transient nor the response format), with
    what to check: the key (401/403), the model name (404: and what the endpoint serves), the context."""
    status = _status(exc)
    if status in (401, 403):
        hint = "check the judge's API key"
    elif status == 404:
        hint = "check the model name and base_url"
        served = await transport.served_models() if isinstance(transport, OpenAITransport) else None
        if served:
            hint += f"; the endpoint serves: {', '.join(served[:20])}"
    elif is_context_overflow(exc):
        return JudgeContextError(
            f"judge {judge.label} refused the request: {_describe(exc)}; the prompt does not fit "
            "the judge's context: use a judge with a longer context, or smaller groups or shorter "
            "trajectories (e.g. cut long tool results).",
            judge=judge.label,
            endpoint_message=str(exc),
        )
    else:
        hint = "check the judge's model name, base_url and params"
    return JudgeRequestError(
        f"judge {judge.label} refused the request: {_describe(exc)}; {hint}.", judge=judge.label
    )
