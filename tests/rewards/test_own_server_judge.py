"""End to end: a model served by ART's own server as the judge (fully local, offline).

The tiny random-weight model cannot write JSON, so this shows the failure path a weak judge takes:
bounded re-asks, then a JudgeAnswerError that quotes the answer and says what to do, or None with
swallow_exceptions=True.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from judge_helpers import FAST_RETRY, conversation, group_of

from art.rewards import Judge, JudgeAnswerError, JudgeRequestError, RetryPolicy, ruler, ruler_score_group

pytest.importorskip("torch", reason="needs the `local` extra: pip install -e '.[local]'")


@pytest.fixture
async def own_server(tiny_model_path: Path) -> AsyncIterator[str]:
    from art.engines.torch.torch_engine import TorchEngine
    from art.openai_server.http import ServerThread, create_app

    engine = TorchEngine.from_pretrained(str(tiny_model_path), served_name="tiny-judge", max_num_seqs=4)
    server = ServerThread(create_app(engine, api_key="local-key"))
    base_url = server.start()
    try:
        yield base_url
    finally:
        server.stop()
        await engine.close()


async def test_a_weak_local_judge_fails_clearly(own_server: str) -> None:
    judge = Judge(
        model="tiny-judge",
        base_url=own_server,
        api_key="local-key",
        params={"max_tokens": 24, "temperature": 0},
        retry=RetryPolicy(max_invalid_answers=1, initial_delay=0.01, max_delay=0.05),
        timeout=60,
    )
    lists = [conversation("4"), conversation("5")]
    with pytest.raises(JudgeAnswerError) as info:
        await ruler(lists, judge, rubric="Correct answers score higher.", cache=False)
    message = str(info.value)
    assert "tiny-judge" in message and "2 unusable answer(s)" in message
    assert "JSON" in message and "Its text began" in message
    assert "max_invalid_answers" in message  # says what to do

    # In a training loop the group is dropped instead (gather's after_each receives None).
    dropped = await ruler_score_group(
        group_of("4", "5"),
        judge,
        rubric="Correct answers score higher.",
        cache=False,
        swallow_exceptions=True,
    )
    assert dropped is None


async def test_request_errors_name_what_to_fix(own_server: str) -> None:
    lists = [conversation("4"), conversation("5")]
    wrong_key = Judge(model="tiny-judge", base_url=own_server, api_key="wrong", retry=FAST_RETRY)
    with pytest.raises(JudgeRequestError, match=r"401.*API key"):
        await ruler(lists, wrong_key, cache=False)
    unknown = Judge(model="no-such-judge", base_url=own_server, api_key="local-key", retry=FAST_RETRY)
    with pytest.raises(JudgeRequestError, match=r"404.*the endpoint serves: tiny-judge"):
        await ruler(lists, unknown, cache=False)
