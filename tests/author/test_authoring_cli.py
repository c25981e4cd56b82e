"""The authoring tasks as users type them: patch.edit -> edit -> patch.new -> patch.refresh."""

from __future__ import annotations

import shutil

import pytest

from patchkit import ops
from support.cli import invoke as support_invoke
from support.upstream import EAGLE_WORKER, SERIES_059, default_wheelhouse

pytestmark = [pytest.mark.wheels]


def invoke(*args):
    import os

    env = dict(os.environ)
    if default_wheelhouse():
        env["PATCHKIT_WHEELHOUSE"] = default_wheelhouse()
    return support_invoke(*args, env=env)


def test_edit_new_refresh_roundtrip(tmp_path, sglang_059_installed):
    series = tmp_path / "series"
    shutil.copytree(SERIES_059, series)
    edit = tmp_path / "edit"
    proc = invoke("patch.edit", "--series", str(series), "--dest", str(edit))
    assert proc.returncode == 0, proc.stderr
    worker = edit / EAGLE_WORKER
    text = worker.read_text()
    anchor = "    def forward_batch_generation("
    assert anchor in text
    worker.write_text(text.replace(anchor, "    # my own note\n" + anchor, 1))
    proc = invoke(
        "patch.new",
        "0008-my-note.patch",
        "--edited",
        str(edit),
        "--series",
        str(series),
        "--header",
        "A user's own line.",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (series / "series").read_text().split()[-1] == "0008-my-note.patch"
    patch = (series / "0008-my-note.patch").read_text()
    assert patch.startswith("A user's own line.") and "+    # my own note" in patch
    # refresh of an unchanged tree rewrites nothing; the series applies on a real installed tree
    before = (series / "0008-my-note.patch").read_bytes()
    proc = invoke("patch.refresh", "--edited", str(edit), "--series", str(series))
    assert proc.returncode == 0 and "unchanged" in proc.stdout, proc.stdout + proc.stderr
    assert (series / "0008-my-note.patch").read_bytes() == before
    res = ops.apply(str(series), [str(sglang_059_installed)])
    assert res.exit_code == 0, res.to_json()
    assert "# my own note" in (sglang_059_installed / "sglang/srt/speculative/eagle_worker.py").read_text()
    assert invoke("patch.gen-runtime", "--series", str(series), "--check").returncode == 0
    assert ops.revert(str(series), [str(sglang_059_installed)]).exit_code == 0
