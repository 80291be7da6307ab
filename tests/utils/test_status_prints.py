"""`art.utils.logging`: the reference's one-line status prints, as a user sees them on a terminal."""

from __future__ import annotations

import re

import pytest

from art.utils.logging import _C, dim, err, info, ok, step, warn


def test_each_print_has_a_time_stamp_a_coloured_tag_and_the_message(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for show, colour, tag in ((info, _C.BLUE, "INFO"), (step, _C.CYAN, "STEP"), (ok, _C.GREEN, "OK")):
        show("loading")
        line = capsys.readouterr().out
        assert re.fullmatch(
            rf"\[\d\d:\d\d:\d\d\] {re.escape(colour)}{tag}{re.escape(_C.RESET)} +loading\n", line
        )
    warn("slow judge")
    err("server exited")
    out = capsys.readouterr().out.splitlines()
    assert (
        f"{_C.YELLOW}WARN{_C.RESET}  slow judge" in out[0]
        and f"{_C.RED}ERR{_C.RESET}   server exited" in out[1]
    )
    dim("detail")
    assert capsys.readouterr().out == f"{_C.DIM}detail{_C.RESET}\n"
