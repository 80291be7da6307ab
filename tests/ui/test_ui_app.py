"""`art ui`'s pages served for real (uvicorn on 127.0.0.1) over hand-written records: what each page shows,
bad input answered with a page (never a 5xx), a torn record shown with what could not be read, live
changes seen through /api/version, and nothing written."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from test_ui_record import snapshot

pytest.importorskip("fastapi", reason="needs the `local` extra: pip install -e '.[local]'")

from helpers_servers import UvicornThread

from art.record.storage import ModelStorage
from art.ui.app import create_app


@pytest.fixture
def served(record: ModelStorage) -> Iterator[httpx.Client]:
    server = UvicornThread(create_app(record.base_path), "art ui")
    url = server.start().removesuffix("/v1")
    with httpx.Client(base_url=url, timeout=30) as client:
        yield client
    server.stop()


def text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_the_index_lists_projects_and_models(served: httpx.Client) -> None:
    page = served.get("/")
    assert page.status_code == 200
    assert 'href="/m/proj/agent"' in page.text and "tiny" in page.text
    assert "train: 3" in text(page.text) and "val: 2" in text(page.text)


def test_the_model_page_charts_every_metric_by_split(served: httpx.Client) -> None:
    page = served.get("/m/proj/agent")
    assert page.status_code == 200
    body = text(page.text)
    assert "reward ■ train ■ val" in body  # one chart per metric, a line per split
    assert page.text.count("<svg") >= 2 and "wall time per step" in body
    for name in ("reward", "loss", "step_wall_s"):
        assert f'value="{name}"' in page.text or f'value="time/{name}"' in page.text  # the chooser lists it
    chosen = served.get("/m/proj/agent", params={"metric": "loss"})
    assert "loss ■ train" in text(chosen.text) and "reward ■ train" not in text(chosen.text)
    assert 'href="/m/proj/agent/train/3"' in page.text and 'href="/m/proj/agent/val/0"' in page.text


def test_a_step_shows_its_groups_with_advantages_and_the_trainers_token_stats(served: httpx.Client) -> None:
    page = served.get("/m/proj/agent/train/2")
    assert page.status_code == 200
    body = text(page.text)
    assert "2 groups, 6 trajectories" in body and "Trainer" in body
    assert body.count("adv ") == 6 and "adv 0.500" in body and "adv -0.500" in body
    assert "trajectory 2 of scenario 1 was judged" in body
    assert 'href="/m/proj/agent/train/2/1/2"' in page.text


def test_a_trajectory_shows_chat_tools_tokens_and_neighbours(served: httpx.Client) -> None:
    page = served.get("/m/proj/agent/train/2/0/2")
    assert page.status_code == 200
    body = text(page.text)
    assert "advantage 0.500" in body and "Judge" in body and "trajectory 2 of scenario 0 was judged" in body
    assert "→ look" in body and "found it" in body and "result of c1" in body  # tool call and its result
    # the sampled turn's tokens: sampled logprob, trainer logprob, ratio, trained or not
    tokens = re.findall(
        r'<span class="tok (t[01n])"[^>]*data-s="([^"]*)"[^>]*data-t="([^"]*)" data-r="([^"]*)"', page.text
    )
    assert tokens[:4] == [
        ("t0", "-0.5000", "—", "—"),
        ("t1", "-0.2500", "-0.2000", "1.0500"),
        ("t1", "-0.1250", "-0.1000", "1.0200"),
        ("t1", "-3.0000", "-0.5000", "1.5000"),
    ]
    assert "Neighbours in group 0" in body and body.count("Reply") == 0
    assert 'href="/m/proj/agent/train/2/0/0"' in page.text and 'href="/m/proj/agent/train/2/0/1"' in page.text


def test_two_checkpoints_compared_on_the_same_scenarios(served: httpx.Client) -> None:
    page = served.get("/m/proj/agent/compare", params={"split": "val", "a": 0, "b": 3})
    body = text(page.text)
    assert page.status_code == 200 and "2 scenarios at both steps" in body
    assert "scenario_id=0 0.100 0.250 0.150" in body  # mean reward at each step and the change
    detail = text(
        served.get("/m/proj/agent/compare", params={"split": "val", "a": 0, "b": 3, "scenario": 0}).text
    )
    assert "Side by side" in detail and "step 0" in detail and "step 3" in detail


@pytest.mark.parametrize(
    ("url", "status", "says"),
    [
        ("/m/proj/nope", 404, "no model proj/nope"),
        ("/m/..%2F..%2Fetc/agent", 400, "Bad request"),
        ("/m/proj/agent/train/77", 404, "no train trajectories at step 77"),
        ("/m/proj/agent/train/abc", 400, "step"),
        ("/m/proj/agent/train/2/9/0", 404, "no trajectory 9/0"),
        ("/m/proj/agent/compare?split=val&a=x&b=1", 400, "a"),
        ("/m/proj/agent?page=-1", 400, "page"),
        ("/nowhere", 404, "Not Found"),
    ],
)
def test_bad_input_gets_a_page_saying_what_is_wrong(
    served: httpx.Client, url: str, status: int, says: str
) -> None:
    page = served.get(url)
    assert page.status_code == status and says in text(page.text), text(page.text)[:400]


def test_a_torn_record_shows_what_it_could_not_read_and_the_rest(
    record: ModelStorage, served: httpx.Client
) -> None:
    path = record.trajectories_path("train", 3)
    lines = path.read_text().splitlines()
    path.write_text(lines[0] + "\n" + lines[1][:40])  # the second group is being written
    page = served.get("/m/proj/agent/train/3")
    body = text(page.text)
    assert page.status_code == 200 and "Could not read everything" in body and "line 2" in body
    assert "1 groups, 3 trajectories" in body


def test_the_version_changes_when_a_run_writes_and_the_new_step_appears(
    record: ModelStorage, served: httpx.Client
) -> None:
    before = served.get("/api/version", params={"model": "proj/agent"}).json()["version"]
    assert served.get("/api/version", params={"model": "proj/agent"}).json()["version"] == before
    record.append_groups("train", 4, record.read_groups("train", 3))
    record.append_history(4, {"train/reward": 0.4})
    assert served.get("/api/version", params={"model": "proj/agent"}).json()["version"] != before
    assert 'href="/m/proj/agent/train/4"' in served.get("/m/proj/agent").text


def test_browsing_every_page_writes_nothing(record: ModelStorage, served: httpx.Client) -> None:
    before = snapshot(record.base_path)
    for url in (
        "/",
        "/m/proj/agent",
        "/m/proj/agent/train/1",
        "/m/proj/agent/train/1/1/1",
        "/m/proj/agent/compare?split=val&a=0&b=3&scenario=1",
        "/api/version",
    ):
        assert served.get(url).status_code == 200
    assert snapshot(record.base_path) == before


def test_a_folder_that_is_not_a_record_says_so(tmp_path: Path) -> None:
    server = UvicornThread(create_app(tmp_path), "art ui")
    url = server.start().removesuffix("/v1")
    try:
        page = httpx.get(url + "/")
        assert page.status_code == 200 and "is not an ART record" in text(page.text)
    finally:
        server.stop()


def test_a_chart_labels_whole_steps_and_one_step_once() -> None:
    """A one-step run's chart reads `step 1` under its point (not a made-up range around it); a longer run
    `step A` ... `step B`; one value on the y axis is labelled once (the browser test measures the page)."""
    import re

    from art.ui.pages import chart

    def ticks(svg: str, axis: str) -> list[str]:
        return re.findall(rf'<text class="tick {axis}"[^>]*>([^<]*)</text>', svg)

    one = chart("loss", {"train": ([1], [2.0])})
    assert ticks(one, "x") == ["step 1"] and ticks(one, "y") == ["2"]
    assert 'cx="250.0"' in one  # the point in the middle of the plot, over its label
    two = chart("reward", {"train": ([1, 2, 3], [0.1, 0.3, 0.2]), "val": ([0, 3], [0.2, 0.4])})
    assert ticks(two, "x") == ["step 0", "step 3"] and ticks(two, "y") == ["0.100", "0.250", "0.400"]
