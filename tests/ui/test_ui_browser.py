"""`art ui` in a real browser: headless Chromium from the system's packages (Debian: `apt-get install -y
chromium`), driven by Playwright, over a record made by a real short training run. The page lists the model,
opens a step, shows a trajectory with its advantage and token tooltips, and picks up a new step while open.

Screenshots go to the test's folder (and to $ART_UI_SCREENSHOTS when set: docs/ui.md's come from there).
Skipped, saying why, only where no Chromium or no Playwright is installed.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = next(
    (
        p
        for p in (os.environ.get("ART_CHROMIUM"), shutil.which("chromium"), "/usr/bin/chromium")
        if p and os.path.exists(p)
    ),
    None,
)
if CHROMIUM is None:
    pytest.skip(
        "no Chromium on this machine: apt-get install -y chromium (Debian's package)", allow_module_level=True
    )
sync_api = pytest.importorskip(
    "playwright.sync_api", reason="Playwright is not installed: pip install -e '.[dev]'"
)

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip


@pytest.fixture
def ui_url(trained_record: Path, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """`art ui` (the real command, in a subprocess) over a copy of the trained record; (URL, model folder)."""
    root = tmp_path / ".art"
    shutil.copytree(trained_record.parents[2], root)
    model_dir = root / trained_record.relative_to(trained_record.parents[2])
    from art.cli.ui import spawn

    proc, url = spawn(root, tmp_path / "ui.log")
    try:
        yield url, model_dir
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.fixture
def page(tmp_path: Path) -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield browser.new_page(viewport={"width": 1400, "height": 1000})
        browser.close()


def shoot(page: Any, tmp_path: Path, name: str, *, full_page: bool = True) -> Path:
    path = tmp_path / f"ui-{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    assert path.stat().st_size > 10_000  # a rendered page, not a blank one
    if os.environ.get("ART_UI_SCREENSHOTS"):
        shutil.copy(path, Path(os.environ["ART_UI_SCREENSHOTS"]) / path.name)
    return path


def test_a_person_finds_the_model_a_step_and_a_trajectorys_advantage(
    ui_url: tuple[str, Path], page: Any, tmp_path: Path
) -> None:
    from art.record.storage import ModelStorage, group_fingerprint

    url, model_dir = ui_url
    storage = ModelStorage(model_dir.parents[2], model_dir.parents[1].name, model_dir.name)
    page.goto(url + "/")
    assert page.locator("table.models").inner_text().count("digits") == 1
    shoot(page, tmp_path, "index")

    page.click("text=digits")
    page.wait_for_selector("figure.chart svg polyline")
    assert "reward" in page.locator("figure.chart figcaption").first.inner_text()
    assert page.locator("table.checkpoints").inner_text().count("kept") == 3
    shoot(page, tmp_path, "model")

    page.click('a.step[href$="/train/1"]')
    page.wait_for_selector("a.card")
    assert page.locator("a.card").count() == 8
    assert "updated the adapter" in page.inner_text("main")
    shoot(page, tmp_path, "step")

    group = storage.read_groups("train", 1)[0]
    advantage = storage.trained_groups("train", 1)[group_fingerprint(group)].trajectories[3].advantage
    page.click('a.card[data-trajectory="0/3"]')
    page.wait_for_selector(".conversation .tok.t1")
    summary = page.locator("p.summary").inner_text()
    assert f"advantage {advantage:.3f}" in summary and f"reward {group.trajectories[3].reward:.3f}" in summary
    assert "Judge" in page.inner_text("main") and "lookup" in page.inner_text(".conversation")
    page.hover(".conversation .tok.t1 >> nth=1")
    tip = page.locator("#tip")
    assert (
        tip.is_visible()
        and "trainer logprob" in tip.inner_text()
        and f"advantage        {advantage:.4f}" in tip.inner_text()
    )
    shoot(page, tmp_path, "trajectory", full_page=False)
    assert page.locator(".columns .col").count() == 3  # the neighbours in the group, side by side

    page.goto(url + f"/m/{storage.project}/{storage.name}/compare?split=val&a=0&b=2&scenario=0")
    assert "2 scenarios at both steps" in page.inner_text("main")
    shoot(page, tmp_path, "compare")


def test_a_new_step_appears_without_a_reload(ui_url: tuple[str, Path], page: Any) -> None:
    url, model_dir = ui_url
    page.goto(url + f"/m/{model_dir.parents[1].name}/{model_dir.name}")
    page.wait_for_selector("#live:has-text('live')")
    page.evaluate("window.notReloaded = true")
    assert page.locator('a[href$="/train/3"]').count() == 0
    folder = model_dir / "trajectories" / "train"  # what a training run writes next
    shutil.copy(folder / "0002.jsonl", folder / "0003.jsonl")
    page.wait_for_selector('a[href$="/train/3"]', timeout=15_000)
    assert page.evaluate("window.notReloaded") is True


def write_one_step_record(base: Path, group_size: int = 8) -> Any:
    """A one-step run as the demo leaves it: held-out games at steps 0 and 1, one train step of a group of
    `group_size` (7 neighbours beside each trajectory), and the trainer's timings at step 1 only."""
    from conftest import group, trainer_record

    from art.record.storage import ModelStorage

    storage = ModelStorage(base, "proj", "agent")
    storage.write_model_json({"name": "agent", "project": "proj", "base_model": "tiny", "trainable": True})
    groups = [group(0, [i / (group_size - 1) for i in range(group_size)])]
    storage.append_groups("train", 1, groups)
    storage.append_trainer_record("train", 1, trainer_record(groups, 1))
    timings = {f"train/{k}": 0.5 + i for i, k in enumerate(("forward_backward_s", "tokenize_s", "save_s", "canary_s", "load_adapter_s"))}  # fmt: skip
    storage.append_history(1, {"train/reward": 0.5, "time/step_wall_s": 2.0, **timings})
    for step in (0, 1):
        storage.append_groups("val", step, [group(0, [0.1 * step, 0.2])])
        storage.append_history(step, {"val/reward": 0.2 + 0.1 * step})
    return storage


@pytest.fixture
def one_step_ui(tmp_path: Path) -> Iterator[tuple[str, Any]]:
    """`art ui` (the real command) over a one-step record; (URL, its storage)."""
    from art.cli.ui import spawn

    storage = write_one_step_record(tmp_path / ".art")
    proc, url = spawn(tmp_path / ".art", tmp_path / "ui.log")
    try:
        yield url, storage
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.fixture
def narrow_page() -> Iterator[Any]:
    """A 1300 px wide window (a laptop's browser, not maximised)."""
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield browser.new_page(viewport={"width": 1300, "height": 900})
        browser.close()


def test_a_one_step_runs_charts_read_whole_steps_and_share_one_width(
    one_step_ui: tuple[str, Any], narrow_page: Any, tmp_path: Path
) -> None:
    url, storage = one_step_ui
    narrow_page.goto(url + f"/m/{storage.project}/{storage.name}")
    narrow_page.wait_for_selector("figure.chart svg circle")
    charts = narrow_page.eval_on_selector_all(
        "figure.chart",
        """figs => figs.map(f => ({
            title: f.querySelector('figcaption').firstChild.textContent.trim(),
            width: f.getBoundingClientRect().width,
            svg: f.querySelector('svg') ? f.querySelector('svg').getBoundingClientRect().width : null,
            x: Array.from(f.querySelectorAll('text.tick.x')).map(t => t.textContent),
        }))""",
    )
    shoot(narrow_page, tmp_path, "one-step-model")
    by_title = {c["title"]: c for c in charts}
    assert {"reward", "wall time per step (s)", "trainer phases (s)"} <= set(by_title), by_title
    for chart in charts:  # whole steps only, never 0.8 / 1.2
        assert chart["x"] and all(
            label.startswith("step ") and label[5:].isdigit() for label in chart["x"]
        ), chart
    for title in ("wall time per step (s)", "trainer phases (s)"):  # one point: its step, once
        assert by_title[title]["x"] == ["step 1"], by_title[title]
    assert by_title["reward"]["x"] == ["step 0", "step 1"]  # the base model's held-out games, then step 1
    widths = {round(c["width"]) for c in charts}
    assert len(widths) == 1, [(c["title"], c["width"]) for c in charts]  # one width, whatever the legend
    assert all(abs(c["svg"] - charts[0]["svg"]) < 1 for c in charts)


def test_the_neighbours_row_fits_a_1300_px_window(
    one_step_ui: tuple[str, Any], narrow_page: Any, tmp_path: Path
) -> None:
    url, storage = one_step_ui
    narrow_page.goto(url + f"/m/{storage.project}/{storage.name}/train/1/0/0")
    narrow_page.wait_for_selector(".columns .col")
    assert narrow_page.locator(".columns .col").count() == 7  # the group's 7 other trajectories
    sizes = narrow_page.evaluate(
        """() => {
            const row = document.querySelector('.columns');
            const cols = Array.from(row.querySelectorAll('.col')).map(c => c.getBoundingClientRect());
            return {window: window.innerWidth, page: document.documentElement.scrollWidth,
                    row: row.getBoundingClientRect().right, scroll: row.scrollWidth, client: row.clientWidth,
                    right: Math.max(...cols.map(c => c.right)), narrowest: Math.min(...cols.map(c => c.width))};
        }"""
    )
    shoot(narrow_page, tmp_path, "neighbours-1300")
    assert sizes["page"] <= sizes["window"], sizes  # no horizontal scroll bar on the page
    assert sizes["scroll"] <= sizes["client"] and sizes["row"] <= sizes["window"], sizes  # nor in the row
    assert sizes["right"] <= sizes["window"], sizes
    assert sizes["narrowest"] >= 250, sizes  # each column still wide enough to read
