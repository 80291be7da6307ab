"""Whom a failed step blames: the rank that died, whichever peer noticed first (`LocalRanks`, with stand-in ranks
that play scripted parts: tests/training/stand_in_rank.py). A survivor's gloo error often reaches the supervisor
before its peer's death does; the message must still name the dead rank and how it ended."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="needs the `local` extra: pip install -e '.[local]'")


from art.training.distributed.rank_messages import RankStep, RankTemplate
from art.training.distributed.ranks import BLAME_GRACE_S, LocalRanks, RankFailure
from art.types import LoRAConfig, RuntimeOptions, TrainSpec

HERE = Path(__file__).resolve().parent


def ranks(monkeypatch: pytest.MonkeyPatch, script: str, world_size: int = 2) -> LocalRanks:
    monkeypatch.setenv("STAND_IN_RANK_SCRIPT", script)
    monkeypatch.setenv("PYTHONPATH", f"{HERE}:{__import__('os').environ.get('PYTHONPATH', '')}")
    template = RankTemplate(base_model="unused", dtype="float32", lora=LoRAConfig(), options=RuntimeOptions())
    backend = LocalRanks(template, ["cpu"] * world_size, module="stand_in_rank")
    backend.start()
    return backend


def step() -> RankStep:
    return RankStep(groups=[], spec=TrainSpec(learning_rate=1e-4), current_step=0, state_dir="-", out_dir="-")


def test_the_dead_rank_is_named_though_its_survivor_reported_first(monkeypatch: pytest.MonkeyPatch) -> None:
    backend = ranks(monkeypatch, "0=noticer,1=die:0.5")  # rank 0's error arrives ~0.5 s before rank 1 dies
    pids = backend.pids()
    with pytest.raises(RankFailure) as caught:
        backend.run_step(step(), None)
    message = str(caught.value)
    assert f"trainer rank 1 (pid {pids[1]}) died while training a step: killed by SIGKILL" in message, message
    assert "rank 0 then failed with: RuntimeError: [gloo] Read error" in message, message
    assert not message.startswith("trainer rank 0")


def test_a_rank_that_raises_is_named_when_no_peer_died(monkeypatch: pytest.MonkeyPatch) -> None:
    backend = ranks(monkeypatch, "0=hang,1=raise")  # rank 0 waits in a collective: alive, blameless
    pids = backend.pids()
    started = time.monotonic()
    with pytest.raises(RankFailure) as caught:
        backend.run_step(step(), None)
    message = str(caught.value)
    assert f"trainer rank 1 (pid {pids[1]}) failed while training a step" in message, message
    assert "ValueError: a bug in this rank" in message
    assert time.monotonic() - started >= BLAME_GRACE_S  # it did wait for a death before blaming rank 1


def test_a_death_seen_first_is_named_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    backend = ranks(monkeypatch, "0=hang,1=die:0")
    pids = backend.pids()
    with pytest.raises(RankFailure) as caught:
        backend.run_step(step(), None)
    assert f"trainer rank 1 (pid {pids[1]}) died while training a step: killed by SIGKILL" in str(
        caught.value
    )
