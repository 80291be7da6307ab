"""Which LLM writes the data (the generator) and which one scores it (the judge), and how to reach them.

Either is named by a LiteLLM model string (`"openai/gpt-4.1-mini"`, key from the provider's usual
environment variable or given), by a model name at any OpenAI-compatible `base_url` (a local server works,
offline), or by `"self"`: the base model being trained, through its own server. The self judge is a
plumbing run: a small base model judges (and writes) poorly, and every result says so.

Both are built as `art.rewards.Judge` specs (model, base_url, api_key, timeout, retries), the one
machinery the package has for "ask an LLM for JSON and validate the answer".
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, Any, Literal

from art.common.offline_litellm import import_litellm
from art.rewards.judge import JUDGE_EXTRA_HINT, Judge, RetryPolicy

if TYPE_CHECKING:
    from art.model import Model, TrainableModel

SELF = "self"
Role = Literal["generator", "judge"]

SELF_MAX_TOKENS = 768  # enough for a group's scores as JSON; a small model that never closes it stops here
SELF_MAX_EXPLANATION_CHARS = 160  # per trajectory: a group of 8 then fits SELF_MAX_TOKENS
SELF_LABEL = "self (the base model judging itself: a plumbing run, weak)"


class NotConfiguredError(ValueError):
    """No usable generator or judge was given; the message says exactly what to set, `role` which one.

    Example:
        try:
            judge = llm_spec("judge", None)
        except NotConfiguredError as error:
            print(error)  # says which option or environment variable to set
    """

    def __init__(self, message: str, role: Role = "judge") -> None:
        super().__init__(message)
        self.role = role


def how_to_configure(role: Role, hints: Literal["flags", "kwargs"] = "kwargs") -> str:
    """The ways to name a generator or judge, as flags (`--judge ...`) or keyword arguments (`judge=...`)."""
    env = f"ART_{role.upper()}"
    if hints == "flags":
        name, url, key = f"--{role}", f"--{role}-base-url", f"--{role}-api-key"
        model, base, eq = f"{name} ", f"{url} ", " "
    else:
        name, url, key = role, f"{role}_base_url", f"{role}_api_key"
        model, base, eq = f"{name}=", f"{url}=", "="
    return (
        f"  {model}openai/gpt-4.1-mini        any LiteLLM model string, with its provider's key set "
        "(e.g. OPENAI_API_KEY)\n"
        f"  {model}NAME {base}http://HOST:PORT/v1 [{key}{eq}KEY]   any OpenAI-compatible server, "
        "local ones included\n"
        f"  {model}self                        the base model itself through its own server: "
        "a plumbing run, weak\n"
        f"  (or the environment variables {env}, {env}_BASE_URL, {env}_API_KEY)"
    )


def _litellm_problem(model: str, has_key: bool, key_option: str) -> str | None:
    """Why LiteLLM cannot call `model` as configured (unknown provider, missing key), or None."""
    if importlib.util.find_spec("litellm") is None:
        return f"is a LiteLLM model string, but litellm is not installed ({JUDGE_EXTRA_HINT})"
    litellm = import_litellm()

    quiet, litellm.suppress_debug_info = litellm.suppress_debug_info, True  # no provider-list banner
    try:
        litellm.get_llm_provider(model=model)
    except Exception:
        return "names no provider LiteLLM knows; write it as 'provider/model', e.g. 'openai/gpt-4.1-mini'"
    finally:
        litellm.suppress_debug_info = quiet
    if has_key:
        return None
    try:
        report = litellm.validate_environment(model=model)
    except Exception:
        return None
    missing = report.get("missing_keys") if isinstance(report, dict) else None
    if isinstance(missing, list) and missing:
        return f"needs {', '.join(str(k) for k in missing)}, which is not set; set it or give the key ({key_option})"
    return None


def llm_spec(
    role: Role,
    model: str | None,
    base_url: str | None = None,
    api_key: str | None = None,
    *,
    trainable: TrainableModel | Model | None = None,
    params: dict[str, Any] | None = None,
    timeout: float = 120.0,
    retry: RetryPolicy | None = None,
    hints: Literal["flags", "kwargs"] = "kwargs",
) -> Judge:
    """A `Judge` spec for the generator or the judge; raises NotConfiguredError saying what to set.

    `model="self"` needs `trainable`, registered (its server is what answers).

    Example:
        llm_spec("judge", "openai/o4-mini")
        llm_spec("generator", "qwen3-8b", base_url="http://127.0.0.1:8000/v1")
    """
    if not model or not model.strip():
        raise NotConfiguredError(
            f"no {role} is configured: this needs an LLM to "
            f"{'write its training data' if role == 'generator' else 'score the rollouts (RULER)'}. "
            f"Set one of:\n{how_to_configure(role, hints)}",
            role,
        )
    model = model.strip()
    extra = dict(params or {})
    policy = retry or RetryPolicy()
    if model == SELF:
        if trainable is None:
            raise NotConfiguredError(
                f"{role}='self' needs the model being trained, registered with a backend", role
            )
        return self_judge(trainable, params=extra, retry=retry, role=role)
    if base_url is None:
        key_option = f"--{role}-api-key" if hints == "flags" else f"{role}_api_key="
        problem = _litellm_problem(model, bool(api_key), key_option)
        if problem:
            raise NotConfiguredError(
                f"the {role} {model!r} {problem}. Or use another {role}:\n{how_to_configure(role, hints)}",
                role,
            )
    return Judge(model=model, base_url=base_url, api_key=api_key, params=extra, timeout=timeout, retry=policy)


def self_judge(
    trainable: TrainableModel | Model,
    *,
    params: dict[str, Any] | None = None,
    timeout: float = 900.0,
    retry: RetryPolicy | None = None,
    role: Role = "judge",
) -> Judge:
    """The base model of `trainable`, through its own server, as a judge or generator (weak by nature).

    Example:
        judge = self_judge(model)  # `model` registered: its own server answers
        group = await art.rewards.ruler_score_group(group, judge)
    """
    base_model = getattr(trainable, "base_model", None)
    if trainable.inference_base_url is None or not base_model:
        raise NotConfiguredError(
            f"{role}='self' uses the trained model's own server: register the model first "
            "(`await model.register(backend)`)",
            role,
        )
    return Judge(
        model=str(base_model),
        base_url=trainable.inference_base_url,
        api_key=trainable.inference_api_key,
        params={"temperature": 0.0, "max_tokens": SELF_MAX_TOKENS, **(params or {})},
        timeout=timeout,
        # A small model on a busy CPU is slow, not down: one long wait, one retry.
        retry=retry or RetryPolicy(max_attempts=2, max_invalid_answers=1, initial_delay=0.1, max_delay=1.0),
        name=SELF_LABEL if role == "judge" else "self (the base model writing its own data: weak)",
        # a small model explains in loops until max_tokens cuts its JSON; our server's grammar bounds it
        max_explanation_chars=SELF_MAX_EXPLANATION_CHARS if role == "judge" else None,
    )


def is_self(judge: Judge) -> bool:
    """Whether `judge` is the base model judging itself (its label says so)."""
    return (judge.name or "").startswith("self (")
