"""Issue 17: every failure says what happened, with the contract's exit code, and leaves the
target byte-identical. Run through the real CLI (`invoke patch.*`) on small real trees."""

from __future__ import annotations

import json
import shlex

import pytest

from failure_support import (GOOD, invoke, json_doc, one_line, small_series, small_target,
                             tree_digest)


@pytest.fixture
def tree(tmp_path):
    return small_target(tmp_path / "target")


@pytest.fixture
def series(tmp_path):
    return small_series(tmp_path / "series")


# -- 1. a wrapper that fails with exit 1 (no such container, pod not found) shows its stderr ----------

@pytest.mark.parametrize("rc", [1, 2, 125])
def test_exec_prefix_failure_shows_its_stderr(tree, series, rc):
    before = tree_digest(tree)
    prefix = f"bash -c {shlex.quote(f'echo Error: no such container: c9 >&2; exit {rc}')}"
    proc = invoke("patch.apply", "--series", str(series), "--target", str(tree), "--exec", prefix,
                  "--json")
    assert proc.returncode == 1, proc.stderr
    host = json.loads(proc.stdout)["hosts"][0]
    assert any("no such container: c9" in m for m in host["messages"]), host
    text = invoke("patch.verify", "--series", str(series), "--target", str(tree), "--exec", prefix)
    assert text.returncode == 1
    assert "no such container" in text.stdout      # the table's error column
    assert tree_digest(tree) == before
