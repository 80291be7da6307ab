"""Gathering rollouts: order, exception budget (count and fraction), after_each, progress bar."""

from __future__ import annotations

import asyncio
import io

import pytest

import art


async def ok(reward: float, delay: float = 0.0) -> art.Trajectory:
    await asyncio.sleep(delay)
    return art.Trajectory(messages_and_choices=[{"role": "user", "content": "x"}], reward=reward)


async def fail(message: str = "rollout broke", delay: float = 0.0) -> art.Trajectory:
    await asyncio.sleep(delay)
    raise RuntimeError(message)


async def test_groups_come_back_in_input_order_with_their_rollouts() -> None:
    """The promise: groups in input order, each group's trajectories in the order of its rollouts, however
    they finish. Here they finish in exactly the reverse order (each rollout waits for the next one to
    finish), so completion order would give every list reversed."""
    n_groups, per_group = 4, 3
    done = [asyncio.Event() for _ in range(n_groups * per_group)]
    finished: list[float] = []

    async def rollout(i: int) -> art.Trajectory:
        if i + 1 < len(done):
            await done[i + 1].wait()
        finished.append(float(i))
        done[i].set()
        return art.Trajectory(messages_and_choices=[{"role": "user", "content": "x"}], reward=float(i))

    groups = await art.gather_trajectory_groups(
        [art.TrajectoryGroup(rollout(g * per_group + r) for r in range(per_group)) for g in range(n_groups)],
        pbar_desc=None,
    )
    assert finished == sorted(finished, reverse=True)  # the last rollout finished first
    assert [[t.reward for t in g] for g in groups] == [
        [0.0, 1.0, 2.0],
        [3.0, 4.0, 5.0],
        [6.0, 7.0, 8.0],
        [9.0, 10.0, 11.0],
    ]


async def test_failures_within_a_count_budget_stay_in_their_groups() -> None:
    groups = await art.gather_trajectory_groups(
        [art.TrajectoryGroup([ok(1), fail()]), art.TrajectoryGroup([ok(0), ok(1)])],
        pbar_desc=None,
        max_exceptions=1,
    )
    assert [len(g.trajectories) for g in groups] == [1, 2]
    assert [len(g.exceptions) for g in groups] == [1, 0]
    assert groups[0].exceptions[0].message == "rollout broke"


async def test_over_the_budget_the_rollouts_own_exception_is_raised_and_the_rest_cancelled() -> None:
    """As the reference: the failure that exceeded `max_exceptions` is raised as it is (code that catches its
    rollout's errors still does), with a note that gives the count."""
    finished: list[int] = []

    async def slow(i: int) -> art.Trajectory:
        await asyncio.sleep(5)
        finished.append(i)
        return art.Trajectory(messages_and_choices=[], reward=0)

    with pytest.raises(RuntimeError, match="second") as info:
        await art.gather_trajectory_groups(
            [art.TrajectoryGroup([fail("first"), fail("second", delay=0.01), slow(1), slow(2)])],
            pbar_desc=None,
            max_exceptions=1,
        )
    assert str(info.value) == "second"
    (note,) = info.value.__notes__
    assert "2 of 4 rollouts failed, more than max_exceptions=1" in note and "RuntimeError('first')" in note
    assert info.value.__traceback__ is not None
    assert finished == []


async def test_default_budget_is_zero() -> None:
    with pytest.raises(RuntimeError, match="rollout broke"):
        await art.gather_trajectory_groups([art.TrajectoryGroup([ok(1), fail()])], pbar_desc=None)


@pytest.mark.parametrize(("fraction", "raises"), [(0.25, False), (0.2, True)])
async def test_fractional_budget(fraction: float, raises: bool) -> None:
    # 1 failure out of 4 rollouts: allowed by 0.25, not by 0.2
    groups = [art.TrajectoryGroup([ok(1), ok(0), ok(1), fail()])]
    if raises:
        with pytest.raises(RuntimeError, match="rollout broke"):
            await art.gather_trajectory_groups(groups, pbar_desc=None, max_exceptions=fraction)
    else:
        result = await art.gather_trajectory_groups(groups, pbar_desc=None, max_exceptions=fraction)
        assert len(result[0].exceptions) == 1


async def test_after_each_can_replace_drop_or_split() -> None:
    async def after_each(
        group: art.TrajectoryGroup,
    ) -> art.TrajectoryGroup | list[art.TrajectoryGroup] | None:
        first = group.trajectories[0].reward
        if first == 0:
            return None
        if first == 1:
            return [art.TrajectoryGroup([t]) for t in group.trajectories]
        return art.TrajectoryGroup(group.trajectories, metadata={"seen": True})

    groups = await art.gather_trajectory_groups(
        [art.TrajectoryGroup([ok(0)]), art.TrajectoryGroup([ok(1), ok(1)]), art.TrajectoryGroup([ok(2)])],
        pbar_desc=None,
        after_each=after_each,
    )
    assert [len(g) for g in groups] == [1, 1, 1]
    assert groups[2].metadata == {"seen": True}


async def test_plain_coroutines_that_build_groups_are_counted(capsys: pytest.CaptureFixture[str]) -> None:
    async def make_group() -> art.TrajectoryGroup:
        return await art.TrajectoryGroup([ok(1), ok(0)])

    groups = await art.gather_trajectory_groups([make_group(), make_group()], pbar_desc="rollouts")
    assert [len(g) for g in groups] == [2, 2]
    err = capsys.readouterr().err
    assert "rollouts" in err and "4/4" in err and "reward=0.5" in err and "exceptions=0" in err


async def test_gather_trajectories_returns_failures_in_place_within_budget() -> None:
    results = await art.gather_trajectories([ok(1), fail(), ok(0)], pbar_desc=None, max_exceptions=1)
    assert isinstance(results[0], art.Trajectory) and results[0].reward == 1
    assert isinstance(results[1], RuntimeError)
    assert isinstance(results[2], art.Trajectory) and results[2].reward == 0
    with pytest.raises(RuntimeError, match="rollout broke"):
        await art.gather_trajectories([ok(1), fail()], pbar_desc=None)


async def test_gather_trajectories_takes_rollouts_that_return_several(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A multi-agent rollout returns a list; its place holds the list and the bar counts each trajectory."""

    async def both_players(reward: float) -> list[art.Trajectory]:
        return [await ok(reward), await ok(1 - reward)]

    results = await art.gather_trajectories([both_players(1), both_players(0), fail()], max_exceptions=1)
    assert [[t.reward for t in r] for r in results[:2] if isinstance(r, list)] == [[1, 0], [0, 1]]
    assert isinstance(results[2], RuntimeError)
    err = capsys.readouterr().err
    assert "5/5" in err and "reward=0.5" in err and "exceptions=1" in err  # 4 trajectories, 1 failure

    async def not_trajectories() -> list[str]:
        return ["x"]

    with pytest.raises(TypeError, match=r"expected art\.Trajectory or a list of them"):
        await art.gather_trajectories([not_trajectories()], pbar_desc=None)


async def test_bad_budget_is_refused() -> None:
    with pytest.raises(ValueError, match="max_exceptions"):
        await art.gather_trajectory_groups([], max_exceptions=-1)


# ---- the reference's building blocks (GatherContext, set_gather_context, wrap_*_awaitable) -------------
async def self_play(game: int) -> tuple[art.Trajectory, art.Trajectory]:
    """One game, two players' trajectories (the reference's tic-tac-toe self-play example's shape)."""
    from helpers_choices import make_choice

    if game == 3:
        raise RuntimeError("game 3 crashed")
    moves = [{"role": "user", "content": f"game {game}"}, make_choice("move", token_ids=[1, 2, 3, 4])]
    return (
        art.Trajectory(messages_and_choices=moves, reward=1.0, metrics={"moves": 4}),
        art.Trajectory(messages_and_choices=moves, reward=0.0, metrics={"moves": 2}),
    )


async def test_a_hand_made_gather_on_the_reference_pieces_runs_as_written_there() -> None:
    from tqdm import tqdm

    from art.gather import GatherContext, get_gather_context, set_gather_context, wrap_group_awaitable

    context = GatherContext(pbar=None, max_exceptions=1)
    with set_gather_context(context):
        assert get_gather_context() is context
        future = asyncio.gather(*[wrap_group_awaitable(self_play(g)) for g in range(5)])
        context.pbar = tqdm(total=10, file=io.StringIO())
        results = await future
    context.pbar.close()

    assert results[3] is None  # the crashed game, within the budget
    played = [r for r in results if r is not None]
    assert len(played) == 4 and all(first.reward == 1.0 for first, _ in played)
    assert context.metric_sums["exceptions"] == 1
    assert context.metric_sums["reward"] / context.metric_divisors["reward"] == 0.5
    assert context.metric_sums["moves"] / context.metric_divisors["moves"] == 3
    assert played[0][0].metrics["completion_tokens"] == 4  # sampled tokens per trainable turn
    assert context.pbar.n == 8
    assert get_gather_context() is not context  # the block ended


async def test_failures_past_the_reference_budget_raise_and_within_it_come_back() -> None:
    from tqdm import tqdm

    from art.gather import (
        GatherContext,
        set_gather_context,
        wrap_group_awaitable,
        wrap_trajectories_awaitable,
    )

    with set_gather_context(GatherContext(max_exceptions=0)), pytest.raises(RuntimeError, match="game 3"):
        await wrap_group_awaitable(self_play(3))

    context = GatherContext(
        pbar=tqdm(total=4, file=io.StringIO()), max_exceptions=0.5
    )  # half of the bar's total
    with set_gather_context(context):
        results = await asyncio.gather(
            *[wrap_trajectories_awaitable(c) for c in (ok(1.0), fail("a"), fail("b"), ok(0.0))]
        )
        assert [type(r).__name__ for r in results] == [
            "Trajectory",
            "RuntimeError",
            "RuntimeError",
            "Trajectory",
        ]
        with pytest.raises(RuntimeError, match="third"):  # 3 of 4 failed: past half
            await wrap_trajectories_awaitable(fail("third"))
        several = await wrap_trajectories_awaitable(self_play(0))
    assert isinstance(several, list) and len(several) == 2


async def test_a_trajectory_group_awaited_under_a_reference_context_reports_each_rollout() -> None:
    from art.gather import GatherContext, set_gather_context, wrap_group_awaitable

    context = GatherContext()
    with set_gather_context(context):
        group = await wrap_group_awaitable(art.TrajectoryGroup([ok(1.0), ok(0.0), fail()]))
    assert len(group.trajectories) == 2 and len(group.exceptions) == 1
    assert context.metric_divisors["reward"] == 2 and context.metric_sums["exceptions"] == 1
