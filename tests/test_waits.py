"""Long waits say what they wait for (`art.waits.waiting`): nothing for a short wait, a line once a wait
lasts, reminders, and how long it took. Where ART uses it: tests/backends/test_local.py (registration and
a step) and tests/rewards/test_judge_client.py (a slow judge)."""

from __future__ import annotations

import time

import pytest

from art.waits import waiting


def lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("[art] ")]


def test_a_short_wait_says_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    with waiting("loading", after=0.5):
        pass
    assert capsys.readouterr().err == ""


def test_a_long_wait_says_what_it_waits_for_then_how_long_it_took(capsys: pytest.CaptureFixture[str]) -> None:
    with waiting("loading the model", after=0.05):
        time.sleep(0.3)
    said = lines(capsys.readouterr().err)
    assert said == ["[art] loading the model...", "[art] loading the model: done in 0 s"]


def test_a_long_wait_that_fails_says_so_and_reminds_while_it_lasts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(RuntimeError), waiting("judging", after=0.05, every=0.1):
        time.sleep(0.38)
        raise RuntimeError("judge down")
    said = lines(capsys.readouterr().err)
    assert said[0] == "[art] judging..." and said[-1] == "[art] judging: failed after 0 s"
    assert 2 <= sum(line.endswith("s so far") for line in said) <= 4
