"""`art ui`'s web app: a read-only FastAPI app over a record folder (`.art/` by default).

Pages (server-rendered HTML, `pages.py`): `/` the projects and models; `/m/{project}/{model}` a model's
metric charts by step and split, step timings, steps, checkpoints and the comparison form;
`/m/{project}/{model}/{split}/{step}` a step's groups side by side; `.../{group}/{trajectory}` one
trajectory (chat, tokens, judge) with its neighbours; `/m/{project}/{model}/compare` two steps on the same
scenarios. `/api/version` is what the page polls to refresh itself while a run trains.

Security: the app only reads. `art ui` binds loopback by default and needs no key there; `art serve`
mounts it under `/ui` with its key (`api_key`): a request passes with `Authorization: Bearer <key>` or the
cookie `/ui/login` sets after the key is typed into its form (a browser cannot send the header itself).
"""

from __future__ import annotations

import hashlib
import hmac
import math
from importlib import resources
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import parse_qs

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from art.metrics.builder import REWARD_KEY, REWARD_STD_DEV_KEY
from art.metrics.taxonomy import TRAINER_METRIC_NAMES
from art.ui import pages
from art.ui.conversation import mean_reward, scenario_key, view
from art.ui.record import ModelRef, RecordReader, split_of

GROUPS_PER_PAGE = 16
STEPS_PER_PAGE = 60
# The charts a model's page draws when none is chosen: the first four of these its history has, named as
# `Model.log` (reward, its spread within groups) and the backend's `train` (the reference's `loss/...`)
# write them, taken from where those names are made. tests/ui/test_ui_trained_record.py checks that a real
# training run writes every one.
DEFAULT_CHARTS = (
    REWARD_KEY,
    TRAINER_METRIC_NAMES["loss"],
    TRAINER_METRIC_NAMES["entropy"],
    REWARD_STD_DEV_KEY,
    TRAINER_METRIC_NAMES["grad_norm"],
)
# The trainer's phases (`train/{key}` in the history), charted under "Step timings"; the whole step's
# trainer time is `time/step_trainer_s`, in the chart of `time/step_*` keys beside them.
TIMING_KEYS = ("forward_backward_s", "tokenize_s", "save_s", "canary_s", "load_adapter_s")
COOKIE = "art_ui_key"
_STATIC = {"ui.js": "text/javascript", "ui.css": "text/css"}


def _cookie_value(api_key: str) -> str:
    # never the key itself in the cookie
    return hashlib.sha256(f"art-ui:{api_key}".encode()).hexdigest()


def create_app(root: str | Path, *, api_key: str | None = None) -> FastAPI:
    """The `art ui` app over the record at `root`. With `api_key`, every page needs it (see module)."""
    reader = RecordReader(root)
    app = FastAPI(title="art ui", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.reader = reader
    static = {name: (resources.files("art.ui") / "static" / name).read_bytes() for name in _STATIC}

    def base(request: Request) -> str:
        return str(request.scope.get("root_path", "")).rstrip("/")

    def page(html: str, status: int = 200) -> HTMLResponse:
        return HTMLResponse(html, status_code=status, headers={"Cache-Control": "no-store"})

    def not_found(request: Request, what: str) -> HTMLResponse:
        b = base(request)
        return page(
            pages.message_page(b, "Not found", pages.e(what) + f' <a href="{b}/">All models</a>'), 404
        )

    if api_key is not None:
        expected_header = f"Bearer {api_key}".encode()
        expected_cookie = _cookie_value(api_key)

        @app.middleware("http")
        async def require_key(request: Request, call_next: Any) -> Response:
            path = (
                request.url.path[len(base(request)) :]
                if request.url.path.startswith(base(request))
                else request.url.path
            )
            header = request.headers.get("authorization", "").encode()
            cookie = request.cookies.get(COOKIE, "")
            if (
                path in ("/login", "/static/ui.css")
                or hmac.compare_digest(header, expected_header)
                or hmac.compare_digest(cookie, expected_cookie)
            ):
                return await call_next(request)  # type: ignore[no-any-return]
            return page(_login_form(base(request), ""), 401)

        @app.post("/login", response_model=None)
        async def login(request: Request) -> Response:
            form = parse_qs((await request.body()).decode("utf-8", "replace"))
            given = (form.get("key") or [""])[0].strip()
            if not hmac.compare_digest(given.encode(), api_key.encode()):
                return page(_login_form(base(request), "That is not this server's key."), 401)
            response = RedirectResponse(f"{base(request)}/", status_code=303)
            response.set_cookie(
                COOKIE, expected_cookie, httponly=True, samesite="strict", path=base(request) or "/"
            )
            return response

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError) -> HTMLResponse:
        where = ", ".join(
            ".".join(str(p) for p in err.get("loc", ())) + ": " + str(err.get("msg"))
            for err in exc.errors()[:3]
        )
        return page(pages.message_page(base(request), "Bad request", pages.e(where)), 400)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> HTMLResponse:
        return page(
            pages.message_page(base(request), f"Error {exc.status_code}", pages.e(exc.detail)),
            exc.status_code,
        )

    @app.get("/static/{name}")
    def static_file(name: str) -> Response:
        if name not in static:
            return Response(status_code=404)
        return Response(static[name], media_type=_STATIC[name], headers={"Cache-Control": "no-cache"})

    @app.get("/api/version")
    def version(model: str = "", split: str = "", step: int | None = None) -> JSONResponse:
        ref = _ref(reader, model) if model else None
        if model and ref is None:
            return JSONResponse(
                {"version": "", "error": f"no model {model!r} in the record"}, status_code=404
            )
        if ref is not None and split and step is not None:
            token = reader.step_version(ref, split, step)
        else:
            token = reader.version(ref)
        return JSONResponse({"version": token}, headers={"Cache-Control": "no-store"})

    @app.get("/", response_class=HTMLResponse)
    def index(request: Request) -> HTMLResponse:
        models, problems = reader.models()
        rows = []
        for m in models:
            history, more = reader.history(m)
            problems += more
            last = history[-1] if history else {}
            rewards = [r["train/reward"] for r in history if isinstance(r.get("train/reward"), int | float)]
            rows.append(
                {
                    "model": m,
                    "base_model": reader.registration(m).get("base_model"),
                    "last_step": max((int(r.get("step", 0)) for r in history), default=None)
                    if last
                    else None,
                    "splits": {s: len(reader.steps(m, s)) for s in reader.splits(m)},
                    "checkpoints": sum(1 for c in reader.checkpoints(m) if c.state == "kept"),
                    "reward": rewards[-1] if rewards else None,
                }
            )
        return page(pages.index_page(base(request), str(reader.root), rows, problems))

    @app.get("/m/{project}/{name}", response_class=HTMLResponse)
    def model_view(
        request: Request,
        project: str,
        name: str,
        metric: Annotated[list[str] | None, Query()] = None,
        page_number: Annotated[int, Query(alias="page", ge=0)] = 0,
    ) -> HTMLResponse:
        ref = reader.model(project, name)
        if ref is None:
            return not_found(request, f"The record has no model {project}/{name}.")
        b = base(request)
        history, problems = reader.history(ref)
        splits = reader.splits(ref)
        keys = reader.metric_names(ref)
        known_splits = sorted({*splits, *(split_of(k, splits)[0] for k in keys)} - {""})
        by_name: dict[str, list[str]] = {}
        for key in keys:
            split, short = split_of(key, known_splits)
            by_name.setdefault(short, []).append(key)
        chosen = [m for m in (metric or []) if m in by_name] or [n for n in DEFAULT_CHARTS if n in by_name][
            :4
        ]
        if not chosen:
            chosen = sorted(by_name)[:2]
        charts = [
            pages.chart(
                short,
                {k.partition("/")[0] if k != short else k: reader.series(ref, k) for k in by_name[short]},
            )
            for short in chosen
        ]
        timings = _timing_charts(reader, ref, keys)
        all_steps = {s: reader.steps(ref, s) for s in splits}
        pages_count = max((math.ceil(len(v) / STEPS_PER_PAGE) for v in all_steps.values()), default=1)
        shown: dict[str, list[tuple[int, float | None, str]]] = {}
        reward_at = {s: dict(zip(*reader.series(ref, f"{s}/reward"), strict=True)) for s in splits}
        for split, steps in all_steps.items():
            newest_first = steps[::-1][page_number * STEPS_PER_PAGE : (page_number + 1) * STEPS_PER_PAGE]
            shown[split] = [(s, reward_at[split].get(s), "") for s in newest_first]
        nav = pages.pager(
            lambda p: pages.model_url(b, ref, metric=chosen, page=p) + "#steps", page_number, pages_count
        )
        held_out = {s: v for s, v in all_steps.items() if s != "train"} or all_steps
        return page(
            pages.model_page(
                b,
                ref,
                reader.registration(ref),
                charts,
                pages.metric_chooser(b, ref, sorted(by_name), chosen),
                timings,
                shown,
                nav,
                reader.checkpoints(ref),
                pages.compare_form(b, ref, held_out),
                problems
                + ([] if history or all_steps else ["this model has no history and no trajectories yet"]),
            )
        )

    @app.get("/m/{project}/{name}/compare", response_class=HTMLResponse)
    def compare(
        request: Request, project: str, name: str, split: str, a: int, b: int, scenario: int | None = None
    ) -> HTMLResponse:
        ref = reader.model(project, name)
        if ref is None:
            return not_found(request, f"The record has no model {project}/{name}.")
        left, right = reader.step(ref, split, a), reader.step(ref, split, b)
        problems = left.problems + right.problems
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

            def views(step_file: Any, index: dict[str, int]) -> list[Any]:
                if key not in index:
                    return []
                gi = index[key]
                trained = step_file.trained_group(gi)
                group = step_file.groups[gi]
                return [
                    view(t, trained.trajectories[ti] if trained and ti < len(trained.trajectories) else None)
                    for ti, t in enumerate(group["trajectories"])
                ]

            detail = pages.compare_detail(a, b, views(left, keys_a), views(right, keys_b))
        return page(pages.compare_page(base(request), ref, split, a, b, rows, detail, problems))

    @app.get("/m/{project}/{name}/{split}/{step}", response_class=HTMLResponse)
    def step_view(
        request: Request,
        project: str,
        name: str,
        split: str,
        step: int,
        page_number: Annotated[int, Query(alias="page", ge=0)] = 0,
    ) -> HTMLResponse:
        ref = reader.model(project, name)
        if ref is None:
            return not_found(request, f"The record has no model {project}/{name}.")
        b = base(request)
        steps = reader.steps(ref, split)
        if step not in steps:
            have = ", ".join(map(str, steps[-12:])) or "none"
            return not_found(request, f"{ref.id} has no {split} trajectories at step {step} (steps: {have}).")
        data = reader.step(ref, split, step)
        start = page_number * GROUPS_PER_PAGE
        cards = []
        for gi in range(start, min(start + GROUPS_PER_PAGE, len(data.groups))):
            group, trained = data.groups[gi], data.trained_group(gi)
            views = [
                view(
                    t,
                    trained.trajectories[ti] if trained and ti < len(trained.trajectories) else None,
                    tokens=False,
                )
                for ti, t in enumerate(group["trajectories"])
            ]
            cards.append(pages.group_card(b, ref, split, step, gi, group, views))
        earlier = [s for s in steps if s < step]
        later = [s for s in steps if s > step]
        history, _ = reader.history(ref)
        row = next(
            (
                r
                for r in reversed(history)
                if r.get("step") == step and any(k.startswith(f"{split}/") for k in r)
            ),
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

    @app.get("/m/{project}/{name}/{split}/{step}/{group}/{trajectory}", response_class=HTMLResponse)
    def trajectory_view(
        request: Request, project: str, name: str, split: str, step: int, group: int, trajectory: int
    ) -> HTMLResponse:
        ref = reader.model(project, name)
        if ref is None:
            return not_found(request, f"The record has no model {project}/{name}.")
        data = reader.step(ref, split, step)
        if not 0 <= group < len(data.groups) or not 0 <= trajectory < len(data.groups[group]["trajectories"]):
            return not_found(
                request,
                f"Step {step} of {split} has no trajectory {group}/{trajectory} "
                f"({len(data.groups)} groups were read). " + " ".join(data.problems),
            )
        trained = data.trained_group(group)
        members = data.groups[group]["trajectories"]
        views = [
            view(t, trained.trajectories[ti] if trained and ti < len(trained.trajectories) else None)
            for ti, t in enumerate(members)
        ]
        neighbours = [(j, v) for j, v in enumerate(views) if j != trajectory]
        return page(
            pages.trajectory_page(
                base(request),
                ref,
                split,
                step,
                group,
                trajectory,
                views[trajectory],
                neighbours,
                data.problems,
            )
        )

    return app


def _ref(reader: RecordReader, model_id: str) -> ModelRef | None:
    project, _, name = model_id.partition("/")
    return reader.model(project, name)


def _timing_charts(reader: RecordReader, ref: ModelRef, keys: list[str]) -> list[str]:
    """Seconds per step: the step's wall and trainer time (`time/step_*`; not the running totals
    `time/cum/...`) and the trainer's phases (train/..._s)."""
    wall = [k for k in keys if k.startswith("time/step_") and ("_s" in k or "sec" in k)]
    phases = [f"train/{k}" for k in TIMING_KEYS if f"train/{k}" in keys]
    charts = []
    if wall:
        charts.append(pages.chart("wall time per step (s)", {k: reader.series(ref, k) for k in wall[:6]}))
    if phases:
        charts.append(
            pages.chart("trainer phases (s)", {k.partition("/")[2]: reader.series(ref, k) for k in phases})
        )
    return charts


def _login_form(base: str, error: str) -> str:
    note = f'<p class="problems">{pages.e(error)}</p>' if error else ""
    form = (
        f"{note}This page is served by <code>art serve</code> and needs its key (the file named when it started, "
        f'by default <code>.art/.serve/api_key</code>).<form method="post" action="{pages.e(base)}/login">'
        '<input type="password" name="key" placeholder="API key" autocomplete="current-password"> '
        '<button type="submit">Open</button></form>'
    )
    return pages.message_page(base, "API key needed", form, [("art ui", "")])
