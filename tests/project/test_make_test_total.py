"""`make test` says what each of its two passes runs and how long it usually takes, and ends with
one line summing both: .ci/test_total.py, here on the junit XML of two real pytest runs (small
suites of their own: passes, a failure, a skip, an xfail, an error in a fixture)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TOTAL = REPO / ".ci" / "test_total.py"

FIRST = """
import pytest

def test_a(): pass
def test_b(): pass
def test_c(): assert 1 == 2
@pytest.mark.skip(reason="not here")
def test_d(): pass
"""

SECOND = """
import pytest

@pytest.fixture
def broken():
    raise RuntimeError("setup fails")

def test_e(): pass
@pytest.mark.xfail(reason="known")
def test_f(): assert False
def test_g(broken): pass
"""


def junit_of(tmp_path: Path, name: str, source: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / f"test_{name}.py").write_text(source)
    xml = tmp_path / f"{name}.xml"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            f"--junitxml={xml}",
            ".",
        ],
        cwd=folder,
        capture_output=True,
        timeout=120,
    )
    return xml


def total(*paths: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(TOTAL), *map(str, paths)], capture_output=True, text=True, timeout=60
    )


def test_the_total_line_sums_both_passes(tmp_path):
    one, two = junit_of(tmp_path, "one", FIRST), junit_of(tmp_path, "two", SECOND)
    done = total(one, two)
    assert done.returncode == 0, done.stderr
    line = done.stdout
    assert line.count("\n") == 1, line
    assert line.startswith("make test: 3 passed, 1 failed, 1 errors, 2 skipped over 2 passes in "), line
    assert re.search(
        r"\(pass 1: 2 passed, 1 failed, 1 skipped in \d+ s; pass 2: 1 passed, 1 errors, 1 skipped in \d+ s\)\n$",
        line,
    ), line


def test_a_pass_without_a_result_is_named(tmp_path):
    one = junit_of(tmp_path, "one", FIRST)
    line = total(one, tmp_path / "pass2.xml").stdout
    assert line.startswith("make test: 2 passed, 1 failed, 1 skipped over 2 passes in "), line
    assert "(1 without a result)" in line and "pass 2: no result (it ended before writing pass2.xml)" in line


def test_make_test_announces_each_pass_and_ends_with_the_total():
    """The recipe as make would run it (make -n prints it without running anything)."""
    recipe = subprocess.run(
        ["make", "-n", "test", "STAMP="], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    text = recipe.stdout
    first = text.index("make test, pass 1 of 2: every test but tests/profile")
    second = text.index("make test, pass 2 of 2: tests/profile, one test at a time")
    assert first < text.index("--ignore=tests/profile --junitxml=") < second
    assert "usually about 4 minutes on 2 cores" in text[first:second]
    assert second < text.index("tests/profile --junitxml=", second) < text.index(".ci/test_total.py")
