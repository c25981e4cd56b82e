"""``invoke patch.apply --mode import``: the hook folder written, the target untouched, the
PYTHONPATH printed; refused (1) and invalid (2) with nothing written anywhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from support.cli import invoke
from support.importmode import MOD, demo_series, demo_tree, tree_hashes as _hashes


def _apply_import(series, tree, hook):
    """patch.apply --mode import of ``series`` on ``tree``, the hook folder at ``hook``."""
    return invoke(
        "patch.apply",
        "--series",
        str(series),
        "--target",
        str(tree),
        "--mode",
        "import",
        "--hook-dir",
        str(hook),
    )


def test_apply_import_mode_writes_only_the_hook(tmp_path):
    series, tree = demo_series(tmp_path), demo_tree(tmp_path)
    before = _hashes(tree)
    hook = tmp_path / "hook"
    proc = _apply_import(series, tree, hook)
    assert proc.returncode == 0, proc.stderr
    assert "nothing written in the target" in proc.stdout
    assert f"PYTHONPATH={hook}" in proc.stdout
    assert _hashes(tree) == before
    assert sorted(p.name for p in hook.iterdir()) == [
        "_patchkit_import_hook.py",
        "created",
        "hook.json",
        "series",
        "sitecustomize.py",
    ]
    env = dict(os.environ, PYTHONPATH=f"{hook}{os.pathsep}{tree}", PYTHONDONTWRITEBYTECODE="1")
    run = subprocess.run(
        [sys.executable, "-c", "import demopkg.mod as m; m.f(1)"], env=env, capture_output=True, text=True
    )
    assert "raise ValueError(y)" in run.stderr  # the patched code ran
    assert _hashes(tree) == before


def test_apply_import_mode_json(tmp_path):
    series, tree = demo_series(tmp_path), demo_tree(tmp_path)
    proc = invoke("patch.apply", "--series", str(series), "--target", str(tree), "--mode", "import", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["written_in_target"] == [] and doc["patched_in_memory"] == ["demopkg/mod.py"]
    assert doc["env"]["PYTHONPATH"] == doc["hook"]


def test_apply_import_mode_refuses_a_drifted_target(tmp_path):
    series, tree = demo_series(tmp_path), demo_tree(tmp_path)
    (tree / "demopkg" / "mod.py").write_bytes(MOD.replace(b"x + 1", b"x + 2"))
    before = _hashes(tree)
    hook = tmp_path / "hook"
    proc = _apply_import(series, tree, hook)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert "mod.py: not the pinned text" in proc.stderr
    assert not hook.exists() and _hashes(tree) == before


def test_apply_import_mode_needs_a_local_target(tmp_path):
    series = demo_series(tmp_path)
    proc = invoke(
        "patch.apply", "--series", str(series), "--target", "ssh://gpu1/opt/site", "--mode", "import"
    )
    assert proc.returncode == 2
    assert "--mode import: one local directory target" in proc.stderr


def test_mode_is_checked(tmp_path):
    series, tree = demo_series(tmp_path), demo_tree(tmp_path)
    proc = invoke("patch.apply", "--series", str(series), "--target", str(tree), "--mode", "memory")
    assert proc.returncode == 2 and "--mode" in proc.stderr
    assert not (tree / ".patchkit").exists()
