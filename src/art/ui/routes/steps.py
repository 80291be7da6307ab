"""`art ui`'s pages of steps: a step's groups side by side (`/m/{project}/{name}/{split}/{step}`), one
trajectory with its neighbours in the group (`.../{group}/{trajectory}`), and two steps on the same
scenarios (`/m/{project}/{name}/compare`)."""

from __future__ import annotations

import math
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from art.ui import pages
from art.ui.conversation import mean_reward, scenario_key, view
from art.ui.routes.shared import Reader, base, no_model, not_found, page

router = APIRouter()
GROUPS_PER_PAGE = 16


def _views(step_file: Any, group_index: int, *, tokens: bool = True) -> list[Any]:
    """The views of a group's trajectories, each with the tokens it was trained on when the step has them."""
    trained = step_file.trained_group(group_index)
    return [
        view(
            t, trained.trajectories[ti] if trained and ti < len(trained.trajectories) else None, tokens=tokens
        )
        for ti, t in enumerate(step_file.groups[group_index]["trajectories"])
    ]


@router.get("/m/{project}/{name}/compare", response_class=HTMLResponse)
def compare(
    request: Request,
    reader: Reader,
    project: str,
    name: str,
    split: str,
    a: int,
    b: int,
    scenario: int | None = None,
) -> HTMLResponse:
    """Steps `a` and `b` of `split` scenario by scenario (mean rewards); with `scenario`, its two groups."""
    ref = reader.model(project, name)
    if ref is None:
        return no_model(request, project, name)
    left, right = reader.step(ref, split, a), reader.step(ref, split, b)
    keys_a = {scenario_key(g, i): i for i, g in enumerate(left.groups)}
    keys_b = {scenario_key(g, i): i for i, g in enumerate(right.groups)}
    keys = list(dict.fromkeys([*keys_a, *keys_b]))
    rows = [
        (
            i,
            key,
            mean_reward(left.groups[keys_a[key]]) if key in keys_a else None,
            mean_reward(right.groups[keys_b[key]]) if key in keys_b else None,
        )
        for i, key in enumerate(keys)
    ]
    detail = ""
    if scenario is not None and 0 <= scenario < len(keys):
        key = keys[scenario]
        detail = pages.compare_detail(
            a,
            b,
            _views(left, keys_a[key]) if key in keys_a else [],
            _views(right, keys_b[key]) if key in keys_b else [],
        )
    problems = left.problems + right.problems
    return page(pages.compare_page(base(request), ref, split, a, b, rows, detail, problems))


@router.get("/m/{project}/{name}/{split}/{step}", response_class=HTMLResponse)
def step_view(
    request: Request,
    reader: Reader,
    project: str,
    name: str,
    split: str,
    step: int,
    page_number: Annotated[int, Query(alias="page", ge=0)] = 0,
) -> HTMLResponse:
    """A page of a step's groups side by side, with the step's metrics and links to its neighbours."""
    ref = reader.model(project, name)
    if ref is None:
        return no_model(request, project, name)
    b = base(request)
    steps = reader.steps(ref, split)
    if step not in steps:
        have = ", ".join(map(str, steps[-12:])) or "none"
        return not_found(request, f"{ref.id} has no {split} trajectories at step {step} (steps: {have}).")
    data = reader.step(ref, split, step)
    start = page_number * GROUPS_PER_PAGE
    cards = [
        pages.group_card(b, ref, split, step, gi, data.groups[gi], _views(data, gi, tokens=False))
        for gi in range(start, min(start + GROUPS_PER_PAGE, len(data.groups)))
    ]
    earlier = [s for s in steps if s < step]
    later = [s for s in steps if s > step]
    history, _ = reader.history(ref)
    row = next(
        (r for r in reversed(history) if r.get("step") == step and any(k.startswith(f"{split}/") for k in r)),
        {},
    )
    nav = pages.pager(
        lambda p: pages.model_url(b, ref, split, step, page=p),
        page_number,
        math.ceil(len(data.groups) / GROUPS_PER_PAGE),
    )
    return page(
        pages.step_page(
            b,
            ref,
            split,
            step,
            cards,
            nav,
            data.records,
            row,
            (earlier[-1] if earlier else None, later[0] if later else None),
            (len(data.groups), data.num_trajectories),
            data.problems,
        )
    )


@router.get("/m/{project}/{name}/{split}/{step}/{group}/{trajectory}", response_class=HTMLResponse)
def trajectory_view(
    request: Request,
    reader: Reader,
    project: str,
    name: str,
    split: str,
    step: int,
    group: int,
    trajectory: int,
) -> HTMLResponse:
    """One trajectory (chat, tokens, judge) with the others of its group beside it."""
    ref = reader.model(project, name)
    if ref is None:
        return no_model(request, project, name)
    data = reader.step(ref, split, step)
    if not 0 <= group < len(data.groups) or not 0 <= trajectory < len(data.groups[group]["trajectories"]):
        return not_found(
            request,
            f"Step {step} of {split} has no trajectory {group}/{trajectory} "
            f"({len(data.groups)} groups were read). " + " ".join(data.problems),
        )
    views = _views(data, group)
    neighbours = [(j, v) for j, v in enumerate(views) if j != trajectory]
    return page(
        pages.trajectory_page(
            base(request), ref, split, step, group, trajectory, views[trajectory], neighbours, data.problems
        )
    )
