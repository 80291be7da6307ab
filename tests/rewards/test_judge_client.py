"""The judge client against a misbehaving HTTP judge: bounded retries, clear errors, judge selection."""

from __future__ import annotations

import importlib.util
import re
from typing import Any

import pytest
from judge_helpers import FAST_RETRY, conversation
from scripted_judge import Script

from art.rewards import (
    Judge,
    JudgeAnswerError,
    JudgeConfigError,
    JudgeRequestError,
    JudgeUnavailableError,
    RetryPolicy,
    ruler,
)
from art.rewards.judge import resolve_judges

LISTS = [conversation("MARK:0.8"), conversation("MARK:0.3")]
NEVER = 30.0  # a "slow" answer's delay, far past the judge timeouts below: it comes only if waited for


@pytest.mark.parametrize("fault", ["non_json", "wrong_ids", "missing_id", "out_of_range", "empty"])
async def test_a_bad_answer_is_asked_again(script: Script, make_judge: Any, fault: str) -> None:
    script.queue(fault)
    scores = await ruler(LISTS, make_judge(), cache=False)
    assert [s.score for s in scores] == [0.8, 0.3]
    assert script.count == 2
    # The second request shows the judge its answer and what was wrong with it.
    retry_messages = script.requests[1]["messages"]
    assert retry_messages[-2]["role"] == "assistant"
    assert retry_messages[-1]["role"] == "user" and "could not be used" in retry_messages[-1]["content"]


async def test_a_fenced_answer_needs_no_retry(script: Script, make_judge: Any) -> None:
    script.queue("fenced")
    assert [s.score for s in await ruler(LISTS, make_judge(), cache=False)] == [0.8, 0.3]
    assert script.count == 1


async def test_bad_answers_are_bounded_then_a_clear_error(script: Script, make_judge: Any) -> None:
    judge = make_judge("garbage", retry=RetryPolicy(max_invalid_answers=2, initial_delay=0))
    with pytest.raises(JudgeAnswerError) as info:
        await ruler(LISTS, judge, cache=False)
    assert script.count == 3
    message = str(info.value)
    assert "3 unusable answer(s)" in message and "not JSON" in message
    assert "Trajectory 1 looks best" in message  # shows what the judge said
    assert "JSON schema" in message and "max_invalid_answers" in message  # and what to do
    assert info.value.problems == ["the answer is not JSON"]


async def test_rate_limits_and_server_errors_are_retried(script: Script, make_judge: Any) -> None:
    script.queue("429", "500", "429")
    scores = await ruler(LISTS, make_judge(), cache=False)
    assert [s.score for s in scores] == [0.8, 0.3]
    assert script.count == 4


async def test_rate_limit_forever_ends_in_a_clear_error(script: Script, make_judge: Any) -> None:
    script.queue(*["429"] * 10)
    judge = make_judge(retry=RetryPolicy(max_attempts=3, initial_delay=0.01, jitter=0))
    with pytest.raises(JudgeUnavailableError) as info:
        await ruler(LISTS, judge, cache=False)
    assert script.count == 3
    message = str(info.value)
    assert "failed 3 times" in message and "429" in message and "judge cache" in message


async def test_a_timeout_is_retried(script: Script, make_judge: Any) -> None:
    script.slow_seconds = NEVER  # the first answer does not come while the test runs
    script.queue("slow")
    scores = await ruler(LISTS, make_judge(timeout=0.3), cache=False)
    assert [s.score for s in scores] == [0.8, 0.3]
    assert script.count == 2
    assert script.slow_answered == 0  # the scores came from the retry: the slow answer was not waited for


async def test_a_judge_that_always_times_out(script: Script, make_judge: Any) -> None:
    script.slow_seconds = NEVER
    script.queue("slow", "slow")
    judge = make_judge(timeout=0.2, retry=RetryPolicy(max_attempts=2, initial_delay=0.01))
    with pytest.raises(JudgeUnavailableError, match="Timeout"):
        await ruler(LISTS, judge, cache=False)


async def test_refused_response_format_falls_back(script: Script, make_judge: Any) -> None:
    script.reject_response_format = True
    scores = await ruler(LISTS, make_judge(), cache=False)
    assert [s.score for s in scores] == [0.8, 0.3]
    formats = [body.get("response_format", {}).get("type") for body in script.requests]
    assert formats == ["json_schema", "json_object", None]


async def test_a_refused_request_is_not_retried(script: Script, make_judge: Any) -> None:
    script.queue("401")
    with pytest.raises(JudgeRequestError, match="API key"):
        await ruler(LISTS, make_judge(), cache=False)
    assert script.count == 1


async def test_a_prompt_too_long_for_the_judge_is_not_retried_in_other_formats(
    script: Script, make_judge: Any
) -> None:
    # No response_format makes a prompt fit: one request, and an error that says what to change.
    script.queue("too_long")
    with pytest.raises(JudgeRequestError, match="does not fit the judge's context") as raised:
        await ruler(LISTS, make_judge(), cache=False)
    assert script.count == 1
    # Short trajectories: RULER had nothing to cut, so it did not ask again, and says so.
    assert "no message text long enough to cut" in " ".join(getattr(raised.value, "__notes__", []))


async def test_unreachable_endpoint(make_judge: Any) -> None:
    judge = make_judge(
        base_url="http://127.0.0.1:9/v1", retry=RetryPolicy(max_attempts=2, initial_delay=0.01)
    )
    with pytest.raises(JudgeUnavailableError, match="Connection"):
        await ruler(LISTS, judge, cache=False)


def test_judge_spec() -> None:
    judge = Judge(model="m", base_url="http://h:1/v1/", api_key="secret")
    assert judge.base_url == "http://h:1/v1"
    assert "secret" not in repr(judge) and "secret" not in str(judge.cache_identity())
    assert "secret" not in judge.model_dump_json()
    assert judge.label == "m @ http://h:1/v1" and Judge(model="m", name="x").label == "x"
    (a, b) = resolve_judges(
        ["openai/o4-mini", Judge(model="m", base_url="http://h/v1", params={"t": 1})], {"t": 0, "u": 2}
    )
    assert a.params == {"t": 0, "u": 2} and b.params == {"t": 1, "u": 2}
    with pytest.raises(JudgeConfigError, match="empty list"):
        resolve_judges([])
    with pytest.raises(JudgeConfigError, match="LiteLLM model string"):
        resolve_judges([""])
    assert FAST_RETRY.delay(1) == 0.01 and FAST_RETRY.delay(5) == 0.05
    assert RetryPolicy().delay(1, retry_after=100) == 30.0  # Retry-After is honoured, within bounds


async def test_litellm_string_without_litellm(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "litellm" else real(name, *a)
    )
    with pytest.raises(JudgeConfigError) as info:
        await ruler(LISTS, "openai/o4-mini", cache=False)
    message = str(info.value)
    assert "pip install 'agent-reinforcement-trainer[judge]'" in message and "base_url" in message


async def test_a_cached_answer_needs_neither_litellm_nor_network(
    monkeypatch: pytest.MonkeyPatch, script: Script, make_judge: Any, tmp_path: Any
) -> None:
    # Scoring twice: the second time no request and no transport is made at all.
    judge = make_judge()
    await ruler(LISTS, judge, cache=tmp_path)
    monkeypatch.setattr("art.rewards.judge.make_transport", lambda j: pytest.fail("no transport needed"))
    assert [s.score for s in await ruler(LISTS, judge, cache=tmp_path)] == [0.8, 0.3]
    assert script.count == 1


# ---- LiteLLM (optional extra) -------------------------------------------------------------------------
needs_litellm = pytest.mark.skipif(
    importlib.util.find_spec("litellm") is None,
    reason="litellm is an optional extra (pip install 'agent-reinforcement-trainer[judge]'); not installed",
)


@needs_litellm
async def test_unknown_litellm_model_string() -> None:
    with pytest.raises(JudgeConfigError, match=r"unknown judge model 'no-such-model-xyz'.*provider/model"):
        await ruler(LISTS, "no-such-model-xyz", cache=False)


@needs_litellm
async def test_litellm_judge_against_the_scripted_server(script: Script, judge_server: Any) -> None:
    judge = Judge(
        model="openai/marker",
        api_key="test-key",
        params={"api_base": judge_server.base_url},
        retry=FAST_RETRY,
        timeout=5,
    )
    script.queue("429", "non_json")
    scores = await ruler(LISTS, judge, cache=False)
    assert [s.score for s in scores] == [0.8, 0.3]
    assert script.count == 3
    assert script.requests[0]["model"] == "marker"
    assert script.authorization[0] == "Bearer test-key"


async def test_a_slow_judge_says_it_is_waited_for_and_its_timeouts_are_warnings(
    make_judge: Any,
    script: Any,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from art.common import waits

    monkeypatch.setattr(waits, "NOTICE_AFTER_S", 0.05)
    script.slow_seconds = NEVER
    script.queue("slow")
    with caplog.at_level("WARNING", logger="art.rewards"):
        await ruler(LISTS, make_judge(timeout=0.3), cache=False)
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("[art] ")]
    judge = f"judge marker @ {make_judge().base_url}"
    assert said[0] == f"[art] {judge}: waiting for its answer (request 1)..."
    # timed out at 0.3 s: "0 s", or more on a loaded machine (the duration's format is test_waits')
    assert re.fullmatch(
        rf"\[art\] {re.escape(judge)}: waiting for its answer \(request 1\): failed after \d+ s", said[1]
    )
    (retry,) = [r.getMessage() for r in caplog.records if "retry" in r.getMessage()]
    assert retry.startswith(f"{judge}: ") and "Timeout" in retry and "retry 1/" in retry
