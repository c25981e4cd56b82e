"""report.html in a real browser: the pages of a real profile.remote run (with its baseline), of
its prediction (profile.predict) and of a sweep, all from the stand-in server on a local
SGLang tree, opened in headless Chromium (support.browser: the DevTools protocol over a pipe)
with every network path of the browser's own turned off. What the browser must see: no console
error, no request but the page itself, every section, and summary.json's (sweep.json's,
predict.json's) numbers. A screenshot of each page lands in .test-output/report-pages/
(PATCHKIT_TEST_OUTPUT=DIR chooses another place): look at them."""

from __future__ import annotations

import json
import os
import struct
import sys
from pathlib import Path

import pytest

from patchkit.profile.remote import RemoteConfig, run_remote
from patchkit.profile.remote.sweep import run_remote_sweep
from support.browser import open_page
from support.cli import invoke
from support.remote_run import bench_cmd, server_cmd
from support.report_page import printed_as, read_page, resolve
from support.requires import requires
from support.sshd import free_port
from support.upstream import SERIES_059, sglang_installed

pytestmark = [pytest.mark.slow, requires("matplotlib", reason="the report extra")]

REPO = Path(__file__).resolve().parents[2]
SHOTS = Path(os.environ.get("PATCHKIT_TEST_OUTPUT") or REPO / ".test-output") / "report-pages"


def _config(base: Path, tree: Path, name: str, **over) -> RemoteConfig:
    settings = dict(
        targets=[str(tree)],
        python=sys.executable,
        series=str(SERIES_059),
        port=free_port(),
        poll_s=0.1,
        health_timeout_s=15,
        bench_timeout_s=60,
        stop_grace_s=3,
        step_timeout_s=30,
        server_command=server_cmd(base / f"{name}.pids"),
        bench_command=bench_cmd(),
        remote_dir=str(base / f"remote-{name}"),
        out=str(base / name),
        timer_sample=1,
    )
    settings.update(over)
    return RemoteConfig.from_mapping(settings)


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    """A run with its baseline and its prediction, and a sweep of two points x two starts."""
    base = tmp_path_factory.mktemp("pages")
    tree = sglang_installed("0.5.9", base / "site-packages")
    with open(os.devnull, "w") as quiet:
        run = run_remote(_config(base, tree, "run", baseline=True), stream=quiet).run_dir
        sweep = run_remote_sweep(
            _config(base, tree, "sweep", matrix="speculative-num-steps=2,3", repeat=2), stream=quiet
        ).run_dir
    predicted = invoke("profile.predict", str(run))
    assert predicted.returncode == 0, predicted.stderr
    assert f"page: {run / 'report.html'}" in predicted.stdout
    return {"run": Path(run), "sweep": Path(sweep), "point": Path(sweep) / "points" / "02-num-steps3"}


def documents(folder: Path) -> dict:
    names = {"summary": "summary.json", "sweep": "sweep.json", "predict": "predict.json"}
    return {k: json.loads((folder / v).read_text()) for k, v in names.items() if (folder / v).is_file()}


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", path
    return struct.unpack(">II", head[16:24])


SECTIONS = {
    "run": ["run", "cycle", "timeline", "acceptance", "prediction", "trace", "table"],
    "point": ["run", "cycle", "timeline", "acceptance", "prediction", "trace", "table"],
    "sweep": ["verdict", "points", "rounds", "phases", "plan", "sweep", "table"],
}


def expected_sections(which: str, docs: dict) -> list[str]:
    """The sections the page must show. A sweep's plan ("what deciding would take") is there only
    when its verdict is not decided: two points of the stand-in server are sometimes told apart
    in two starts each and sometimes not, so the page is held against sweep.json's own plan
    (tests/report/test_report_html.py draws a plan from a fixed document every time)."""
    sections = list(SECTIONS[which])
    if which == "sweep" and not docs["sweep"].get("plan"):
        sections.remove("plan")
    return sections


@pytest.mark.wheels
@pytest.mark.parametrize("which", ["run", "sweep", "point"])
def test_page_in_chromium_shows_the_files_numbers_and_fetches_nothing(folders, which):
    folder = folders[which]
    shot = SHOTS / f"{which}.png"
    seen = open_page(folder / "report.html", screenshot=shot)
    assert seen.errors == []
    assert seen.requests == [seen.url]  # the file itself, nothing else
    page = read_page(seen.dom)
    docs = documents(folder)
    assert page.sections == expected_sections(which, docs)
    assert page.sourced
    for s in page.sourced:
        value = resolve(docs, s.path)
        assert s.value == value and printed_as(value, s.text), (s.path, value, s.text)
    width, height = png_size(shot)
    assert width >= 1000 and height > 1500  # the whole page, not the first screen


@pytest.mark.wheels
def test_the_run_page_carries_the_prediction_and_the_baseline(folders):
    page = read_page((folders["run"] / "report.html").read_text())
    paths = [s.path for s in page.sourced]
    assert ["summary", "throughput", "baseline_tokens_per_s"] in paths
    assert ["predict", "profiled", "tokens_per_s"] in paths
    assert any(t.startswith("measured at num-steps 3: ") for t in page.tooltips)


@pytest.mark.wheels
def test_the_sweep_page_links_every_points_page(folders):
    sweep = folders["sweep"]
    page = read_page((sweep / "report.html").read_text())
    doc = documents(sweep)["sweep"]
    links = [u for u in page.urls if u.startswith("points/")]
    assert sorted(links) == sorted(f"{r}/report.html" for row in doc["rows"] for r in row["reports"])
    assert all((sweep / link).is_file() for link in links)


def test_the_browser_check_sees_a_request_and_an_error(tmp_path):
    """The harness itself: a page that asks for an image off the machine is caught both ways."""
    (tmp_path / "leak.html").write_text(
        '<!DOCTYPE html><html><body><img src="http://127.0.0.1:9/pixel.png"><p>x</p></body></html>'
    )
    seen = open_page(tmp_path / "leak.html")
    assert "http://127.0.0.1:9/pixel.png" in seen.requests
    assert any("pixel.png" in e or "ERR_" in e for e in seen.errors), seen.errors
