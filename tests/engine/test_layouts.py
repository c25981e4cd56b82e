"""The SGLang v0.5.9 series through the engine on real wheel files: both layouts, the version and
commit checks, and the refusal on 0.5.10 that names every hunk that moved or changed."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from patchkit import ops
from patchkit.output import render_text
from support.upstream import EAGLE_WORKER, PHASE_TIMER, SERIES_059, sglang_checkout

pytestmark = [pytest.mark.wheels]

WHEEL_WORKER = "sglang/srt/speculative/eagle_worker.py"


def snapshot(root: Path) -> dict:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".patchkit" not in p.parts
    }


def test_installed_layout_apply_revert(sglang_059_installed):
    root = sglang_059_installed
    before = snapshot(root)
    res = ops.apply(str(SERIES_059), [str(root)])
    assert res.exit_code == 0, res.to_json()
    host = res.hosts[0]
    assert host.layout == "installed"
    assert set(host.written) == {
        WHEEL_WORKER,
        "sglang/srt/speculative/eagle_worker_v2.py",
        "sglang/srt/speculative/phase_timer.py",
    }
    compile((root / WHEEL_WORKER).read_bytes(), WHEEL_WORKER, "exec")  # no .pyc left behind
    assert b"_pt.cycle_begin" in (root / WHEEL_WORKER).read_bytes()
    assert ops.status(str(SERIES_059), [str(root)]).hosts[0].state == "applied"
    assert ops.revert(str(SERIES_059), [str(root)]).exit_code == 0
    assert snapshot(root) == before
    assert not (root / ".patchkit").exists()  # no trace


def test_installed_layout_verify_and_check_show_target_paths(sglang_059_installed):
    """verify and check name files as they are on the target, as apply does."""
    root = sglang_059_installed
    for op in (ops.verify, ops.check):
        res = op(str(SERIES_059), [str(root)])
        assert res.exit_code == 0, res.to_json()
        paths = {f.path for f in res.hosts[0].files}
        assert WHEEL_WORKER in paths, paths
        assert not any(p.startswith("python/") for p in paths), paths
        text = render_text(res)
        assert f"{WHEEL_WORKER}: pristine" in text and "python/sglang" not in text, text


def test_installed_layout_version_is_checked(sglang_059_installed):
    root = sglang_059_installed
    meta = next(root.glob("sglang-*.dist-info")) / "METADATA"
    meta.write_text(re.sub(r"(?m)^Version: .*$", "Version: 0.5.9rc1", meta.read_text()))
    before = snapshot(root)
    res = ops.apply(str(SERIES_059), [str(root)])
    assert res.exit_code == 1
    assert any("0.5.9rc1" in m and "pinned 0.5.9" in m for m in res.hosts[0].messages), res.to_json()
    assert snapshot(root) == before


def test_checkout_layout_with_pinned_commit(tmp_path):
    root, commit = sglang_checkout("0.5.9", tmp_path / "co", git_repo=True)
    series = tmp_path / "series"
    subprocess.run(["cp", "-r", str(SERIES_059), str(series)], check=True)
    pin = (series / "pin.toml").read_text()
    res = ops.verify(str(series), [str(root)])
    assert res.exit_code == 1 and any("pinned commit is" in m for m in res.hosts[0].messages)
    (series / "pin.toml").write_text(re.sub(r'commit = "[0-9a-f]{40}"', f'commit = "{commit}"', pin))
    res = ops.apply(str(series), [str(root)])
    assert res.exit_code == 0, res.to_json()
    assert res.hosts[0].layout == "checkout"
    assert (root / PHASE_TIMER).exists()
    git_status = subprocess.run(
        ["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True
    ).stdout
    assert ".patchkit" not in git_status
    assert ops.revert(str(series), [str(root)]).exit_code == 0
    assert (
        subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True).stdout
        == ""
    )


def test_0510_is_refused_naming_each_hunk(sglang_0510_checkout):
    root = sglang_0510_checkout
    before = snapshot(root)
    res = ops.verify(str(SERIES_059), [str(root)])
    assert res.exit_code == 1
    (report,) = [f for f in res.hosts[0].files if f.path == EAGLE_WORKER]
    assert report.state == "drifted"
    assert "wc -l 1052, pinned 1032" in report.detail
    hunks = re.findall(
        r"(000\d-[a-z-]+\.patch @@ -\d+,\d+ \+\d+,\d+ @@): (moved|changed|ambiguous)", report.detail
    )
    assert len(hunks) >= 10, report.detail
    assert {kind for _, kind in hunks} >= {"moved", "changed"}
    assert ops.apply(str(SERIES_059), [str(root)]).exit_code == 1
    assert snapshot(root) == before
