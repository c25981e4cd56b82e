"""The series as one unified diff (diff mode of the Ansible collection): `git apply` of it turns
the pinned tree into exactly what patchkit's apply writes, and of its reverse back into the
pinned tree, in both layouts; stacked patches, created files and lines that start with '--'
included (sglang 0.5.9's series, files from the pinned wheel)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from patchkit import ops
from patchkit.engine.unified import series_unified_diff
from support.upstream import SERIES_059, sglang_checkout, sglang_installed


def tree(root):
    return {p.relative_to(root): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.wheels
@pytest.mark.parametrize("layout", ["installed", "checkout"])
def test_forward_and_reverse_diff_reproduce_apply_and_revert(tmp_path, layout):
    make = sglang_installed if layout == "installed" else (lambda v, d: sglang_checkout(v, d)[0])
    pristine = make("0.5.9", tmp_path / "pristine")
    applied = tmp_path / "applied"
    shutil.copytree(pristine, applied)
    assert ops.apply(str(SERIES_059), [str(applied)]).exit_code == 0
    shutil.rmtree(applied / ".patchkit")
    work = tmp_path / "work"
    shutil.copytree(pristine, work)
    forward = series_unified_diff(str(SERIES_059), installed=layout == "installed")
    assert "phase_timer" in forward and not forward.startswith("Times")  # headers left out
    subprocess.run(["git", "apply", "-"], cwd=work, input=forward.encode(), check=True)
    assert tree(work) == tree(applied)
    backward = series_unified_diff(str(SERIES_059), installed=layout == "installed", reverse=True)
    subprocess.run(["git", "apply", "-"], cwd=work, input=backward.encode(), check=True)
    assert tree(work) == tree(pristine)
