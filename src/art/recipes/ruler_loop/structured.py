"""Ask a generator LLM for structured output and validate it: a short or malformed answer is shown back
to the generator with what was wrong and asked again (bounded), then refused with an error quoting it.

The requests go through `art.rewards.judge.ask_judge` (the package's one client for "JSON from an LLM"):
`response_format` json_schema where the endpoint accepts it, falling back to json_object then none on a
400, retries with backoff on timeouts, rate limits and server errors. Its judge-worded failures are
re-raised here as `GeneratorError`s that name the generator and what it was asked for.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from art.rewards.judge import (
    InvalidAnswer,
    Judge,
    JudgeAnswerError,
    JudgeConfigError,
    JudgeError,
    JudgeRequestError,
    JudgeUnavailableError,
    _describe,
    ask_judge,
)
from art.rewards.prompt import _load_json

T = TypeVar("T")


class GeneratorError(RuntimeError):
    """The generator could not produce usable data; the message quotes what it answered and says what to do.

    `last_answer` holds its last raw answer (empty when none came), `problems` what was wrong with it.

    Example:
        try:
            inputs = await generate_training_inputs(task, 24, generator=generator)
        except GeneratorError as error:
            print(error.problems, error.last_answer)
    """

    def __init__(self, message: str, *, last_answer: str = "", problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.last_answer = last_answer
        self.problems = problems or []


def load_json(answer: str | None) -> Any:
    """The JSON value in an answer (a ```json fence or words around one object tolerated).

    Raises InvalidAnswer when there is none, so that the generator is asked again.
    """
    if answer is None or not answer.strip():
        raise InvalidAnswer(["the answer is empty"])
    return _load_json(answer)


def json_schema_format(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI `json_schema` response-format object (not strict: counts and ranges are checked here)."""
    return {"name": name, "schema": schema}


async def generate_structured(
    generator: Judge,
    messages: list[dict[str, Any]],
    parse: Callable[[str | None], T],
    *,
    schema: dict[str, Any] | None,
    what: str,
    on_answer: Callable[[int, str | None], None] | None = None,
) -> T:
    """Send `messages` to `generator` and return `parse(answer)`; see the module docstring.

    `parse` raises `InvalidAnswer` listing the problems of an unusable answer. `what` names the request in
    errors ("24 scenarios"). Raises `GeneratorError` when no usable answer came.

    Example:
        names = await generate_structured(
            generator, [{"role": "user", "content": "Five city names, one per line."}],
            parse=lambda answer: [line for line in (answer or "").splitlines() if line],
            schema=None, what="5 city names",
        )
    """
    label = generator.label
    try:
        return await ask_judge(generator, messages, parse, schema=schema, on_answer=on_answer)
    except JudgeAnswerError as exc:
        tries = generator.retry.max_invalid_answers + 1
        raise GeneratorError(
            f"the generator {label} gave no usable answer for {what} in {tries} tries; what was wrong with "
            f"the last one: {'; '.join(exc.problems)}. It began: {exc.last_answer[:400]!r}. Use a stronger "
            "generator, or an endpoint that supports response_format json_schema.",
            last_answer=exc.last_answer,
            problems=exc.problems,
        ) from None
    except JudgeUnavailableError as exc:
        cause = _describe(exc.__cause__) if exc.__cause__ is not None else str(exc)
        raise GeneratorError(
            f"the generator {label} could not answer ({what}) after {generator.retry.max_attempts} attempts "
            f"(timeouts, rate limits or server errors); the last: {cause}. Check that it is running and "
            "reachable at its base_url, or try again later."
        ) from exc
    except JudgeRequestError as exc:
        cause = _describe(exc.__cause__) if exc.__cause__ is not None else str(exc)
        raise GeneratorError(
            f"the generator {label} refused the request for {what}: {cause}. Check its model name, "
            "base_url and API key."
        ) from exc
    except JudgeConfigError as exc:
        raise GeneratorError(f"the generator {label} cannot be used: {exc}") from None
    except JudgeError as exc:  # any other judge-side failure, worded for the generator
        raise GeneratorError(f"the generator {label} failed ({what}): {exc}") from exc


def dump_for_prompt(value: Any) -> str:
    """Pretty JSON for a prompt."""
    return json.dumps(value, indent=2, ensure_ascii=False)
