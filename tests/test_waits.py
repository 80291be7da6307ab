"""Long waits say what they wait for (`art.common.waits.waiting`): nothing for a short wait, a line once a wait
lasts, reminders, and how long it took. Where ART uses it: tests/backends/test_local.py (registration and
a step) and tests/rewards/test_judge_client.py (a slow judge)."""

from __future__ import annotations

import re
import time

import pytest
from helpers_wait import wait_until

from art.common.waits import waiting


def lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("[art] ")]


class Said:
    """What `waiting` has printed so far (read from captured stderr while its block still runs)."""

    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self.capsys, self.err = capsys, ""

    def __call__(self) -> list[str]:
        self.err += self.capsys.readouterr().err
        return lines(self.err)


def test_a_short_wait_says_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    with waiting("loading", after=60):
        pass
    assert capsys.readouterr().err == ""


def test_a_long_wait_says_what_it_waits_for_then_how_long_it_took(capsys: pytest.CaptureFixture[str]) -> None:
    said = Said(capsys)
    started = time.monotonic()
    with waiting("loading the model", after=0.05):
        wait_until(said, "the first line")  # the block lasts until the notice is out, however long that is
    took = time.monotonic() - started
    first, last = said()
    assert first == "[art] loading the model..."
    seconds = re.fullmatch(r"\[art\] loading the model: done in (\d+) s", last)
    assert seconds is not None, last
    assert abs(int(seconds.group(1)) - took) <= 1  # whole seconds, as measured around the block


def test_a_long_wait_that_fails_says_so_and_reminds_while_it_lasts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    said = Said(capsys)
    started = time.monotonic()
    with pytest.raises(RuntimeError), waiting("judging", after=0.05, every=0.1):
        wait_until(lambda: sum(line.endswith("s so far") for line in said()) >= 2, "two reminders")
        raise RuntimeError("judge down")
    took = time.monotonic() - started
    out = said()
    assert out[0] == "[art] judging..." and re.fullmatch(r"\[art\] judging: failed after \d+ s", out[-1])
    reminders = [line for line in out[1:-1] if re.fullmatch(r"\[art\] judging: \d+ s so far", line)]
    assert len(reminders) == len(out) - 2  # nothing else in between
    assert 2 <= len(reminders) <= took / 0.1 + 1  # no more than one per `every` seconds
