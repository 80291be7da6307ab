"""The HTML of `art ui`'s pages, rendered on the server: plain strings, every value escaped, charts as inline SVG.

No template engine and no front-end build: a page is complete HTML that reads well without JavaScript;
`static/ui.js` only adds the token tooltip, the colour switch and live refresh (it re-fetches the page and
swaps its `<main>` when the record changes). Every function takes what it shows and returns a string.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from html import escape
from typing import Any
from urllib.parse import quote, urlencode

from art.record.step_record import StepTrainerRecord, TokenStats
from art.ui.conversation import Token, TrajectoryView, Turn
from art.ui.record import Checkpoint, ModelRef

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")


def e(value: Any) -> str:
    """HTML-escaped text of any value."""
    return escape(str(value), quote=True)


def num(value: float | None, digits: int = 3) -> str:
    """A number for people: `—` for none, fixed digits otherwise (integers as integers)."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    if isinstance(value, bool):
        return str(value)
    if float(value).is_integer() and abs(value) < 1e12:
        return str(int(value))
    return f"{value:.{digits}g}" if abs(value) >= 1000 or abs(value) < 0.001 else f"{value:.{digits}f}"


def fixed(value: float | None, digits: int = 4) -> str:
    """A number with `digits` decimals (`—` for none), for columns that should line up."""
    if value is None or not math.isfinite(value):
        return "—"
    return f"{value:.{digits}f}"


def model_url(base: str, model: ModelRef, *parts: object, **query: Any) -> str:
    """The URL of a model's page (or a page under it), with query parameters (lists repeat)."""
    path = "/".join([f"{base}/m/{quote(model.project)}/{quote(model.name)}", *(quote(str(p)) for p in parts)])
    pairs = [
        (k, v)
        for k, vs in query.items()
        for v in (vs if isinstance(vs, list | tuple) else [vs])
        if v is not None
    ]
    return path + ("?" + urlencode(pairs) if pairs else "")


def layout(
    title: str, main: str, *, base: str, poll: str | None = None, crumbs: Sequence[tuple[str, str]] = ()
) -> str:
    """A whole page: header with breadcrumbs, `main`, and the script that polls `poll` for changes."""
    trail = " / ".join(f'<a href="{e(href)}">{e(text)}</a>' if href else e(text) for text, href in crumbs)
    poll_attr = f' data-poll="{e(poll)}"' if poll else ""
    return (
        "<!doctype html>\n"
        f'<html lang="en"><head><meta charset="utf-8"><title>{e(title)} · art ui</title>'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<link rel="stylesheet" href="{e(base)}/static/ui.css"></head>'
        f"<body{poll_attr}>"
        f'<header><a class="brand" href="{e(base)}/">art ui</a> <nav>{trail}</nav>'
        '<span id="live" title="the page refreshes itself when the record changes"></span></header>'
        f"<main>{main}</main>"
        '<div id="tip" hidden></div>'
        f'<script src="{e(base)}/static/ui.js"></script></body></html>'
    )


def problems_box(problems: Sequence[str]) -> str:
    """What could not be read, said plainly (nothing when everything was read)."""
    if not problems:
        return ""
    items = "".join(f"<li>{e(p)}</li>" for p in problems[:50])
    more = f"<li>... and {len(problems) - 50} more</li>" if len(problems) > 50 else ""
    return f'<section class="problems"><h3>Could not read everything</h3><ul>{items}{more}</ul></section>'


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], cls: str = "") -> str:
    """A table of already-escaped cells."""
    head = "".join(f"<th>{e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


# ---- charts ---------------------------------------------------------------------------------------
def chart(
    title: str, lines: dict[str, tuple[list[int], list[float]]], *, width: int = 460, height: int = 220
) -> str:
    """A line chart of series by step as inline SVG, with axes, a legend and a tooltip on each marker.

    The step axis is labelled with whole steps only: `step A` at the left and `step B` at the right, or, when
    every point is at one step (a one-step run), `step N` once, under the points. One value on the y axis
    is labelled once too. Every chart card has the same width (the stylesheet), its legend wrapping inside.
    """
    lines = {k: v for k, v in lines.items() if v[0]}
    if not lines:
        return f'<figure class="chart"><figcaption>{e(title)}</figcaption><p class="muted">no values</p></figure>'
    xs = [x for steps, _ in lines.values() for x in steps]
    ys = [y for _, values in lines.values() for y in values if math.isfinite(y)]
    first, last = min(xs), max(xs)
    y0, y1 = (min(ys), max(ys)) if ys else (0.0, 1.0)
    one_value = y0 == y1
    x0, x1 = (first - 1, last + 1) if first == last else (first, last)
    if one_value:
        y0, y1 = y0 - 0.5, y1 + 0.5
    left, right, top, bottom = 48, 8, 8, 22
    pw, ph = width - left - right, height - top - bottom

    def px(x: float) -> float:
        return left + (x - x0) / (x1 - x0) * pw

    def py(y: float) -> float:
        return top + (1 - (y - y0) / (y1 - y0)) * ph

    parts = [
        f'<svg viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" aria-label="{e(title)}">'
    ]
    for frac in (0.0, 0.5, 1.0):
        y = y0 + frac * (y1 - y0)
        parts.append(
            f'<line class="grid" x1="{left}" x2="{width - right}" y1="{py(y):.1f}" y2="{py(y):.1f}"/>'
        )
        if not one_value or frac == 0.5:
            parts.append(
                f'<text class="tick y" x="{left - 4}" y="{py(y) + 4:.1f}" text-anchor="end">{e(num(y, 3))}</text>'
            )
    if first == last:
        parts.append(
            f'<text class="tick x" x="{px(first):.1f}" y="{height - 6}" text-anchor="middle">step {first}</text>'
        )
    else:
        parts.append(
            f'<text class="tick x" x="{left}" y="{height - 6}">step {first}</text>'
            f'<text class="tick x" x="{width - right}" y="{height - 6}" text-anchor="end">step {last}</text>'
        )
    legend = []
    for i, (label, (steps, values)) in enumerate(lines.items()):
        color = PALETTE[i % len(PALETTE)]
        points = [(s, v) for s, v in zip(steps, values, strict=True) if math.isfinite(v)]
        path = " ".join(f"{px(s):.1f},{py(v):.1f}" for s, v in points)
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.6" points="{path}"/>')
        stride = max(1, len(points) // 150)  # markers carry the tooltips; a few hundred at most
        for s, v in points[::stride]:
            parts.append(
                f'<circle cx="{px(s):.1f}" cy="{py(v):.1f}" r="2.4" fill="{color}">'
                f"<title>{e(label)} step {s}: {e(num(v, 4))}</title></circle>"
            )
        legend.append(f'<span style="color:{color}">■</span> {e(label)}')
    parts.append("</svg>")
    return f'<figure class="chart"><figcaption>{e(title)} <small>{" ".join(legend)}</small></figcaption>{"".join(parts)}</figure>'


# ---- index ----------------------------------------------------------------------------------------
def index_page(base: str, root: str, rows: Sequence[dict[str, Any]], problems: Sequence[str]) -> str:
    """Projects and models of the record."""
    body = [f"<h1>Record <code>{e(root)}</code></h1>", problems_box(problems)]
    if rows:
        cells = [
            [
                e(r["model"].project),
                f'<a href="{e(model_url(base, r["model"]))}">{e(r["model"].name)}</a>',
                e(r.get("base_model") or "—"),
                e(num(r.get("last_step"))),
                e(", ".join(f"{k}: {v}" for k, v in r.get("splits", {}).items()) or "—"),
                e(r.get("checkpoints", 0)),
                e(num(r.get("reward"), 3)),
            ]
            for r in rows
        ]
        body.append(
            table(
                [
                    "project",
                    "model",
                    "base model",
                    "last step",
                    "logged steps",
                    "checkpoints",
                    "train reward (last)",
                ],
                cells,
                "models",
            )
        )
    return layout("models", "".join(body), base=base, poll=f"{base}/api/version", crumbs=[("models", "")])


# ---- a model --------------------------------------------------------------------------------------
def metric_chooser(base: str, model: ModelRef, names: Sequence[str], chosen: Sequence[str]) -> str:
    """Checkboxes of every metric name (split-less), grouped; submitting redraws the charts."""
    boxes = "".join(
        f'<label><input type="checkbox" name="metric" value="{e(n)}"{" checked" if n in chosen else ""}> {e(n)}</label>'
        for n in names
    )
    return (
        f'<details class="chooser"><summary>Choose metrics ({len(names)})</summary>'
        f'<form method="get" action="{e(model_url(base, model))}">{boxes}'
        '<p><button type="submit">Draw</button></p></form></details>'
    )


def model_page(
    base: str,
    model: ModelRef,
    registration: dict[str, Any],
    charts: Sequence[str],
    chooser: str,
    timings: Sequence[str],
    steps: dict[str, list[tuple[int, float | None, str]]],
    steps_nav: str,
    checkpoints: Sequence[Checkpoint],
    compare_form: str,
    problems: Sequence[str],
) -> str:
    """Charts by step and split, timings, steps per split, checkpoints, and the comparison form."""
    about = ", ".join(f"{k}: {registration[k]}" for k in ("base_model", "trainable") if k in registration)
    body = [
        f"<h1>{e(model.project)} / {e(model.name)}</h1>",
        f'<p class="muted">{e(about)} · <code>{e(model.dir)}</code></p>' if about else "",
        problems_box(problems),
        "<section><h2>Metrics by step</h2>",
        chooser,
        '<div class="charts">' + "".join(charts) + "</div></section>",
    ]
    if timings:
        body.append(
            '<section><h2>Step timings</h2><div class="charts">' + "".join(timings) + "</div></section>"
        )
    body.append('<section id="steps"><h2>Steps</h2>' + steps_nav)
    if not steps:
        body.append('<p class="muted">no trajectories logged yet</p>')
    for split, rows in steps.items():
        links = "".join(
            f'<a class="step" href="{e(model_url(base, model, split, s))}">'
            f"<b>{s}</b> <small>{e(num(reward, 3))}</small>{' ' + e(mark) if mark else ''}</a>"
            for s, reward, mark in rows
        )
        body.append(f'<h3>{e(split)}</h3><div class="steps" data-split="{e(split)}">{links}</div>')
    body.append("</section>")
    body.append(compare_form)
    body.append("<section><h2>Checkpoints</h2>")
    if checkpoints:
        cells = [
            [
                e(c.step),
                f'<span class="state {e(c.state)}">{e(c.state)}</span>',
                e(c.when[:19].replace("T", " ")),
                e(c.reason or ", ".join(f"{k} {num(v, 3)}" for k, v in c.metrics.items())),
            ]
            for c in checkpoints
        ]
        body.append(table(["step", "state", "when", "why / canary"], cells, "checkpoints"))
    else:
        body.append('<p class="muted">none on disk</p>')
    body.append("</section>")
    return layout(
        model.id,
        "".join(body),
        base=base,
        poll=f"{base}/api/version?model={quote(model.id)}",
        crumbs=[("models", f"{base}/"), (model.id, "")],
    )


def compare_form(base: str, model: ModelRef, split_steps: dict[str, list[int]]) -> str:
    """Two steps of a split (held-out splits first) to compare on the same scenarios."""
    if not split_steps:
        return ""
    options = "".join(f'<option value="{e(s)}">{e(s)}</option>' for s in split_steps)
    steps = sorted({s for v in split_steps.values() for s in v})
    first, last = (steps[0], steps[-1]) if steps else (0, 0)
    return (
        "<section><h2>Compare two checkpoints</h2>"
        f'<form class="inline" method="get" action="{e(model_url(base, model, "compare"))}">'
        f'split <select name="split">{options}</select> '
        f'step <input name="a" type="number" value="{first}"> vs step <input name="b" type="number" value="{last}"> '
        '<button type="submit">Compare</button></form>'
        '<p class="muted">The same scenarios (matched by scenario_id, else by the first user message) at two '
        "steps: each step's rollouts come from that step's checkpoint.</p></section>"
    )


# ---- a step ---------------------------------------------------------------------------------------
def color(advantage: float | None) -> str:
    """The background of a trained token (and a trajectory's badge): green for a positive advantage, red for
    a negative one, stronger the larger it is (2 standard deviations is full strength)."""
    if advantage is None or advantage == 0:
        return "transparent"
    alpha = 0.12 + 0.6 * min(abs(advantage) / 2.0, 1.0)
    return f"rgba(22,150,60,{alpha:.2f})" if advantage > 0 else f"rgba(210,40,40,{alpha:.2f})"


def badge(label: str, value: float | None, *, colored: bool = False) -> str:
    style = f' style="background:{color(value)}"' if colored else ""
    return f'<span class="badge"{style}>{e(label)} {e(num(value, 3))}</span>'


def token_stats_table(stats: TokenStats) -> str:
    def cell(v: float | int | None) -> str:
        if isinstance(v, int) or v is None:
            return num(v)
        return f"{v:.3e}" if v != 0 and abs(v) < 1e-3 else fixed(v)

    rows = [[e(k.replace("_", " ")), e(cell(v))] for k, v in stats.model_dump().items()]
    return table(["trained tokens", ""], rows, "kv")


def step_page(
    base: str,
    model: ModelRef,
    split: str,
    step: int,
    cards: Sequence[str],
    nav: str,
    records: Sequence[StepTrainerRecord],
    history_row: dict[str, Any],
    neighbours: tuple[int | None, int | None],
    total: tuple[int, int],
    problems: Sequence[str],
) -> str:
    """A step's groups, each a row of its trajectories side by side, with the trainer's token statistics."""
    prev_step, next_step = neighbours
    arrows = " ".join(
        f'<a href="{e(model_url(base, model, split, s))}">{label}</a>'
        for s, label in ((prev_step, "← previous step"), (next_step, "next step →"))
        if s is not None
    )
    body = [
        f"<h1>{e(split)} · step {step}</h1>",
        f"<p>{total[0]} groups, {total[1]} trajectories. {arrows}</p>",
        problems_box(problems),
    ]
    if records:
        r = records[-1]
        body.append(
            '<section class="side"><h2>Trainer</h2>'
            f"<p>{'updated the adapter' if r.updated else 'took no optimiser step'} · loss {e(r.loss_fn)} "
            f"({e(r.importance_sampling_level)} ratios, clip {e(num(r.clip_range[0], 3))}–{e(num(r.clip_range[1], 3))})</p>"
            + token_stats_table(r.token_stats)
            + "</section>"
        )
    elif split == "train":
        body.append(
            '<p class="muted">The trainer recorded nothing for this step (a record written before '
            "advantages were kept, or trained elsewhere): advantages are not shown.</p>"
        )
    if history_row:
        keys = sorted(k for k in history_row if k.startswith(f"{split}/"))[:40]
        body.append(
            "<details><summary>History row of this step</summary>"
            + table(["metric", "value"], ([e(k), e(num(history_row[k], 4))] for k in keys), "kv")
            + "</details>"
        )
    body.append(nav)
    body.append('<div class="groups">' + "".join(cards) + "</div>")
    body.append(nav)
    return layout(
        f"{model.id} {split} {step}",
        "".join(body),
        base=base,
        poll=f"{base}/api/version?{urlencode({'model': model.id, 'split': split, 'step': step})}",
        crumbs=[("models", f"{base}/"), (model.id, model_url(base, model)), (f"{split} {step}", "")],
    )


def last_words(v: TrajectoryView, limit: int = 220) -> str:
    """The end of the last assistant turn (what the rollout answered), shortened."""
    for turn in reversed(v.messages):
        if turn.role == "assistant":
            text = turn.content or " ".join(f"{c.name}({c.arguments})" for c in turn.tool_calls)
            return text if len(text) <= limit else "…" + text[-limit:]
    return ""


def group_card(
    base: str,
    model: ModelRef,
    split: str,
    step: int,
    gi: int,
    group: dict[str, Any],
    views: Sequence[TrajectoryView],
) -> str:
    """One group as a row of trajectory cards (reward, advantage, fate, answer, judge's reason)."""
    cards = []
    for ti, v in enumerate(views):
        href = model_url(base, model, split, step, gi, ti)
        why = f'<p class="why">{e(v.explanation[:240])}</p>' if v.explanation else ""
        cards.append(
            f'<a class="card" href="{e(href)}" data-trajectory="{gi}/{ti}">'
            f"<div>#{ti} {badge('reward', v.reward)} {badge('adv', v.advantage, colored=True)}</div>"
            f'<p class="answer">{e(last_words(v))}</p>{why}'
            f'<p class="muted">{e(v.status)}</p></a>'
        )
    exceptions = len(group.get("exceptions") or [])
    extra = f" · {exceptions} failed rollout(s)" if exceptions else ""
    scenario = group.get("metadata") or {}
    meta = (
        f' <small class="muted">{e(", ".join(f"{k}={val}" for k, val in list(scenario.items())[:4]))}</small>'
        if scenario
        else ""
    )
    return f'<section class="group"><h3>group {gi}{extra}{meta}</h3><div class="row">{"".join(cards)}</div></section>'


def pager(url_of: Any, page: int, pages: int) -> str:
    if pages <= 1:
        return ""
    links = []
    for p in range(pages):
        if p == page:
            links.append(f"<b>{p + 1}</b>")
        elif p < 3 or p >= pages - 3 or abs(p - page) <= 2:
            links.append(f'<a href="{e(url_of(p))}">{p + 1}</a>')
        elif links[-1] != "…":
            links.append("…")
    return f'<nav class="pager">page {" ".join(links)}</nav>'


# ---- a trajectory ---------------------------------------------------------------------------------
def token_html(token: Token, advantage: float | None) -> str:
    text = token.text.replace("\n", "↵\n") if token.text else "∅"
    data = f' data-s="{fixed(token.sampled_logprob)}"'
    if token.trained is None:
        cls = "tok tn"
        style = ""
    else:
        data += f' data-t="{fixed(token.trainer_logprob)}" data-r="{fixed(token.ratio)}" data-m="{int(token.trained)}"'
        cls = "tok t1" if token.trained else "tok t0"
        style = f' style="background:{color(advantage)}"' if token.trained else ""
    if advantage is not None:
        data += f' data-a="{fixed(advantage)}"'
    return f'<span class="{cls}"{style}{data}>{e(text)}</span>'


def turn_html(turn: Turn, advantage: float | None) -> str:
    who = turn.who()
    if turn.sampled:
        who += f" · sampled{', ' + turn.finish_reason if turn.finish_reason else ''}"
    content = f'<div class="content">{e(turn.content)}</div>' if turn.content else ""
    calls = "".join(
        f'<div class="call">→ <b>{e(c.name)}</b>'
        + (f' <small class="muted">{e(c.id)}</small>' if c.id else "")
        + f"<pre>{e(c.arguments)}</pre></div>"
        for c in turn.tool_calls
    )
    tokens = ""
    if turn.tokens:
        trained = sum(1 for t in turn.tokens if t.trained)
        note = (
            f"{len(turn.tokens)} tokens, {trained} trained"
            if any(t.trained is not None for t in turn.tokens)
            else f"{len(turn.tokens)} tokens (no trainer record)"
        )
        tokens = (
            f'<details class="tokens" open><summary>{e(note)}</summary><div class="toks">'
            + "".join(token_html(t, advantage) for t in turn.tokens)
            + "</div></details>"
        )
    return f'<div class="msg {e(turn.role)}"><div class="who">{e(who)}</div>{content}{calls}{tokens}</div>'


def conversation_html(v: TrajectoryView) -> str:
    out = [turn_html(t, v.advantage) for t in v.messages]
    for k, history in enumerate(v.histories[1:], start=1):
        out.append(f"<h4>additional history {k}</h4>" + "".join(turn_html(t, v.advantage) for t in history))
    return "".join(out)


def trajectory_summary(v: TrajectoryView) -> str:
    parts = [badge("reward", v.reward), badge("advantage", v.advantage, colored=True)]
    if v.status:
        parts.append(f'<span class="muted">{e(v.status)}</span>')
    return " ".join(parts)


def trajectory_page(
    base: str,
    model: ModelRef,
    split: str,
    step: int,
    gi: int,
    ti: int,
    v: TrajectoryView,
    neighbours: Sequence[tuple[int, TrajectoryView]],
    problems: Sequence[str],
) -> str:
    """One trajectory: reward, advantage, judge's explanation, metrics, logs, the chat with its tokens; and its
    neighbours in the group side by side."""
    body = [
        f"<h1>{e(split)} · step {step} · group {gi} · trajectory {ti}</h1>",
        problems_box(problems),
        f'<p class="summary">{trajectory_summary(v)}</p>',
    ]
    if v.explanation:
        body.append(f'<section class="explanation"><h2>Judge</h2><p>{e(v.explanation)}</p></section>')
    kv = [[e(k), e(num(val, 4) if isinstance(val, int | float) else val)] for k, val in v.metrics.items()]
    kv += [[e(f"metadata.{k}"), e(val)] for k, val in v.metadata.items()]
    if kv:
        body.append(table(["metric", "value"], kv, "kv"))
    if v.tools:
        body.append(f'<p class="muted">tools: {e(", ".join(v.tools))}</p>')
    if v.logs:
        body.append(
            '<details><summary>logs</summary><pre class="logs">' + e("\n".join(v.logs)) + "</pre></details>"
        )
    body.append(
        '<p class="legend">Tokens: <label>colour by <select id="colour-by">'
        '<option value="advantage">advantage (trained tokens)</option><option value="ratio">importance ratio</option>'
        '<option value="logprob">sampled logprob</option></select></label> · hover a token for its sampled '
        "logprob, the trainer's logprob, the ratio and whether it was trained; dotted: not trained.</p>"
    )
    body.append(f'<div class="conversation">{conversation_html(v)}</div>')
    if neighbours:
        columns = "".join(
            f'<div class="col"><h3><a href="{e(model_url(base, model, split, step, gi, j))}">#{j}</a> '
            f"{trajectory_summary(n)}</h3>{conversation_html(n)}</div>"
            for j, n in neighbours
        )
        body.append(
            f'<section><h2>Neighbours in group {gi}</h2><div class="columns">{columns}</div></section>'
        )
    return layout(
        f"{model.id} {split} {step} {gi}/{ti}",
        "".join(body),
        base=base,
        poll=f"{base}/api/version?{urlencode({'model': model.id, 'split': split, 'step': step})}",
        crumbs=[
            ("models", f"{base}/"),
            (model.id, model_url(base, model)),
            (f"{split} {step}", model_url(base, model, split, step)),
            (f"{gi}/{ti}", ""),
        ],
    )


def compare_page(
    base: str,
    model: ModelRef,
    split: str,
    a: int,
    b: int,
    rows: Sequence[tuple[int, str, float | None, float | None]],
    detail: str,
    problems: Sequence[str],
) -> str:
    """Scenario by scenario, the mean reward at two steps; one scenario's groups side by side."""
    cells = [
        [
            f'<a href="{e(model_url(base, model, "compare", split=split, a=a, b=b, scenario=i))}">{e(key[:120])}</a>',
            e(num(ra, 3)),
            e(num(rb, 3)),
            f'<span style="background:{color(None if ra is None or rb is None else (rb - ra) * 2)}">'
            f"{e(num(None if ra is None or rb is None else rb - ra, 3))}</span>",
        ]
        for i, key, ra, rb in rows
    ]
    both = [(ra, rb) for _, _, ra, rb in rows if ra is not None and rb is not None]
    summary = (
        f"<p>{len(both)} scenarios at both steps: mean reward {num(sum(x for x, _ in both) / len(both), 3)} → "
        f"{num(sum(y for _, y in both) / len(both), 3)}</p>"
        if both
        else '<p class="muted">no scenario was logged at both steps</p>'
    )
    body = [
        f"<h1>{e(split)}: step {a} vs step {b}</h1>",
        problems_box(problems),
        summary,
        table(["scenario", f"reward at {a}", f"reward at {b}", "change"], cells, "compare"),
        detail,
    ]
    return layout(
        f"{model.id} compare",
        "".join(body),
        base=base,
        poll=f"{base}/api/version?model={quote(model.id)}",
        crumbs=[("models", f"{base}/"), (model.id, model_url(base, model)), ("compare", "")],
    )


def compare_detail(a: int, b: int, left: Sequence[TrajectoryView], right: Sequence[TrajectoryView]) -> str:
    def column(step: int, views: Sequence[TrajectoryView]) -> str:
        items = "".join(
            f'<div class="one"><h4>#{i} {trajectory_summary(v)}</h4>{conversation_html(v)}</div>'
            for i, v in enumerate(views)
        )
        return f'<div class="col"><h3>step {step}</h3>{items or "<p class=muted>not logged</p>"}</div>'

    return f'<section><h2>Side by side</h2><div class="columns two">{column(a, left)}{column(b, right)}</div></section>'


def message_page(base: str, title: str, message: str, status_crumbs: Sequence[tuple[str, str]] = ()) -> str:
    """A page that only says something (not found, not a record, a login form...)."""
    return layout(
        title,
        f"<h1>{e(title)}</h1><p>{message}</p>",
        base=base,
        crumbs=status_crumbs or [("models", f"{base}/")],
    )
