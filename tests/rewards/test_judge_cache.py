"""The judge cache: a re-run makes no request; anything that changes the question asks again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from judge_helpers import conversation, group_of
from scripted_judge import Script

from art.rewards import JudgeCache, JudgeUnavailableError, RetryPolicy, ruler, ruler_score_group
from art.rewards.cache import default_cache_dir, resolve_cache

LISTS = [conversation("MARK:0.8"), conversation("MARK:0.3"), conversation("MARK:0.5")]


async def test_a_rerun_makes_no_request(script: Script, make_judge: Any, _cache_in_tmp: Path) -> None:
    group = group_of("MARK:0.9", "MARK:0.1", rewards=[1.0, 0.0])
    first = await ruler_score_group(group, make_judge())  # default cache=True, in the test's temp folder
    second = await ruler_score_group(group, make_judge())
    assert script.count == 1
    assert first is not None and second is not None
    assert [t.reward for t in second.trajectories] == [t.reward for t in first.trajectories] == [0.9, 0.1]
    assert first.metrics["ruler_cache_hits"] == 0 and second.metrics["ruler_cache_hits"] == 1
    assert second.trajectories[0].logs == first.trajectories[0].logs  # the explanation is cached too
    assert default_cache_dir() == _cache_in_tmp and len(list(_cache_in_tmp.rglob("*.json"))) == 1


async def test_what_changes_the_key(script: Script, make_judge: Any, tmp_path: Path) -> None:
    cache = JudgeCache(tmp_path)
    await ruler(LISTS, make_judge(), cache=cache)
    await ruler(LISTS, make_judge(), cache=cache)
    assert script.count == 1
    await ruler(LISTS, make_judge(), rubric="Shorter is better.", cache=cache)  # a new rubric
    await ruler(LISTS, make_judge("reverse"), cache=cache)  # a new judge
    await ruler(LISTS, make_judge(params={"temperature": 0}), cache=cache)  # new request parameters
    await ruler([*LISTS[:2], conversation("MARK:0.6")], make_judge(), cache=cache)  # a changed trajectory
    await ruler(LISTS, make_judge(), seed=7, cache=cache)  # a different order
    assert script.count == 6
    # The key is about the question, not the API key or the retry policy.
    await ruler(LISTS, make_judge(api_key="other", retry=RetryPolicy(max_attempts=9)), cache=cache)
    assert script.count == 6
    assert cache.hits == 2


async def test_cache_off(script: Script, make_judge: Any) -> None:
    await ruler(LISTS, make_judge(), cache=False)
    await ruler(LISTS, make_judge(), cache=None)
    assert script.count == 2


async def test_a_damaged_entry_is_a_miss(script: Script, make_judge: Any, tmp_path: Path) -> None:
    await ruler(LISTS, make_judge(), cache=tmp_path)
    (entry,) = tmp_path.rglob("*.json")
    entry.write_text("{not json")
    assert [s.score for s in await ruler(LISTS, make_judge(), cache=tmp_path)] == [0.8, 0.3, 0.5]
    assert script.count == 2
    await ruler(LISTS, make_judge(), cache=tmp_path)  # rewritten, so now a hit
    assert script.count == 2


async def test_nothing_already_scored_is_lost(script: Script, make_judge: Any, tmp_path: Path) -> None:
    """One judge of an ensemble fails: the other's judgement is cached; the re-run asks only the failed one."""
    flaky = make_judge("reverse", retry=RetryPolicy(max_attempts=2, initial_delay=0.01))
    judges = [make_judge("marker"), flaky]

    script.model_faults["reverse"] = "429"  # this judge is rate limited every time
    with pytest.raises(JudgeUnavailableError, match="reverse"):
        await ruler(LISTS, judges, cache=tmp_path)
    script.model_faults.clear()
    assert len(list(tmp_path.rglob("*.json"))) == 1
    before = script.count
    scores = await ruler(LISTS, judges, cache=tmp_path)
    assert script.count == before + 1  # only the judgement that failed was asked again
    assert [s.score for s in scores] == pytest.approx([0.5, 0.5, 0.5])


def test_resolve_cache(tmp_path: Path) -> None:
    assert resolve_cache(False) is None and resolve_cache(None) is None
    assert resolve_cache(True) is not None
    assert resolve_cache(tmp_path).directory == tmp_path  # type: ignore[union-attr]
    with pytest.raises(TypeError, match="cache must be"):
        resolve_cache(3)  # type: ignore[arg-type]


def test_the_judge_cache_lives_in_arts_cache_folder_unless_told_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ART_JUDGE_CACHE_DIR", raising=False)
    monkeypatch.delenv("ART_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "art" / "judge"
    monkeypatch.setenv("ART_CACHE_DIR", str(tmp_path / "art"))  # one folder for all of ART's caches
    assert default_cache_dir() == tmp_path / "art" / "judge"
    monkeypatch.setenv("ART_JUDGE_CACHE_DIR", str(tmp_path / "judge"))  # the judge's own wins
    assert default_cache_dir() == tmp_path / "judge"
