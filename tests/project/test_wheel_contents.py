"""The wheel's file list: the package, its runtime and the shipped series as the engine reads them.

The wheel is built (pip wheel, no build isolation) from a copy of the checkout's files, the ones
git lists (tracked, and untracked but not ignored), into which a few ignored folders of a working
checkout are planted (.venv, .carry-*, build output). Every file of the wheel is accounted for:
patchkit's modules, its package data (engine/*.sh, timing/*.py), and per shipped series pin.toml,
series and each patch ``series`` lists (the runtime patch rendered in place of its marker), plus
patches/proofs.toml. A series' authoring notes (README.md, REBASE.md: how it was made or rebased)
stay in the checkout, as do tests/, bench/ and docs/.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from patchkit.engine.runtime_patch import MARKER_SUFFIX
from patchkit.engine.series import read_series, read_series_file

pytestmark = [pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
DIST_INFO = "patchkit-0.1.0.dist-info/"
# what an ignored folder of a working checkout could wrongly bring in (a package's own name)
PLANTED = (".venv/lib/patchkit/__init__.py", ".carry-pk/patchkit/__init__.py", "build/lib/patchkit/stale.py")


def _listed() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.decode()
    return [rel for rel in out.split("\0") if rel and (REPO / rel).is_file()]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[zipfile.ZipFile, list[str]]:
    """(the wheel, the files copied from the checkout)."""
    base = tmp_path_factory.mktemp("wheel")
    src = base / "src"
    listed = _listed()
    for rel in listed:
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, src / rel)
    for rel in PLANTED:
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text("raise SystemExit('not part of the wheel')\n")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            str(src),
            "-w",
            str(base / "dist"),
        ],
        cwd=base,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    (wheel,) = (base / "dist").glob("patchkit-*.whl")
    return zipfile.ZipFile(wheel), listed


def _shipped() -> list[str]:
    return sorted(p.parent.name for p in (REPO / "patches").glob("*/pin.toml"))


def test_every_file_of_the_wheel_is_accounted_for(built):
    archive, listed = built
    names = set(archive.namelist())
    modules = {
        "patchkit/" + rel[len("patchkit/") :]
        for rel in listed
        if rel.startswith("patchkit/") and rel.endswith(".py")
    }
    data = {rel for rel in listed if rel.startswith("patchkit/engine/") and rel.endswith(".sh")}
    series = {"patchkit/_series/proofs.toml"}
    for name in _shipped():
        sdir = REPO / "patches" / name
        runtime = ["pin.toml", "series", *read_series_file(str(sdir / "series"))]
        series |= {f"patchkit/_series/{name}/{f}" for f in runtime}
    dist_info = {n for n in names if n.startswith(DIST_INFO)}
    assert {n[len(DIST_INFO) :] for n in dist_info} == {
        "METADATA",
        "WHEEL",
        "entry_points.txt",
        "top_level.txt",
        "RECORD",
    }
    assert sorted(names - dist_info - modules - data - series) == [], "files the wheel should not carry"
    assert sorted((modules | data | series) - names) == [], "files the wheel lacks"


def test_the_runtime_and_the_series_as_the_engine_reads_them(built):
    archive, _ = built
    names = archive.namelist()
    # the timing runtime (what every series' 0001 patch creates) and the target-side program
    assert (
        archive.read("patchkit/timing/phase_timer.py")
        == (REPO / "patchkit/timing/phase_timer.py").read_bytes()
    )
    assert "patchkit/engine/target.sh" in names
    assert archive.read("patchkit/_series/proofs.toml") == (REPO / "patches/proofs.toml").read_bytes()
    shipped = _shipped()
    assert (
        sorted(
            {n.split("/")[2] for n in names if n.startswith("patchkit/_series/") and n.endswith("/pin.toml")}
        )
        == shipped
    )
    for name in shipped:
        ours = read_series(str(REPO / "patches" / name))
        inside = f"patchkit/_series/{name}/"
        assert archive.read(inside + "pin.toml") == ours.pin_bytes, name
        assert archive.read(inside + "series") == (REPO / "patches" / name / "series").read_bytes(), name
        for patch, data in ours.patches:  # the runtime patch rendered from patchkit/timing
            assert archive.read(inside + patch) == data, (name, patch)
    assert not [n for n in names if n.endswith(MARKER_SUFFIX)]


def test_no_authoring_notes_tests_bench_or_docs(built):
    archive, _ = built
    names = archive.namelist()
    assert [n for n in names if n.startswith("patchkit/_series/") and n.endswith(".md")] == []
    assert not [n for n in names if n.rsplit("/", 1)[-1] in ("README.md", "REBASE.md")]
    assert not [n for n in names if not n.startswith(("patchkit/", DIST_INFO))]
    assert not [n for n in names if n.startswith(("patchkit/stale", "tests/", "bench/", "docs/", "patches/"))]
    # the checkout holds the notes the wheel leaves out (else this test would prove nothing)
    assert (REPO / "patches/sglang-v0.5.12/REBASE.md").is_file() and list(
        (REPO / "patches").glob("*/README.md")
    )
