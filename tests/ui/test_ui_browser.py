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
    from art.storage import ModelStorage, group_fingerprint

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
