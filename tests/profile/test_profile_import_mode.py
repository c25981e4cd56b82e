"""profile.run --mode import on a read-only copy of the embedded default's site: the same
records as the sed mode (shape, phases, cycle counts), and the tree byte-identical after.

Both runs at the "ci" size on the CPU with the same seed (greedy decoding: the same cycles).
The copy is made read-only with ``chmod -R a-w``; every file and folder is hashed before and
after (no .pyc, no .patchkit/)."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from patchkit.profile import run_default
from patchkit.profile.site import ProfileError
from support.default_site import PHASE_TIMER, site  # noqa: F401  (site: a pytest fixture)
from support.importmode import tree_hashes
from support.requires import requires

pytestmark = [requires("torch", "huggingface_hub", reason="the profile extra"), pytest.mark.slow]


def _records(run_dir: Path) -> tuple[dict, dict]:
    """({record type: sorted keys}, {(phase, parent): count}) of a run's timing files and summary."""
    shapes: dict = {}
    for path in sorted((run_dir / "timing").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            shapes.setdefault(rec.get("type") or rec.get("kind") or "?", set()).update(rec)
    summary = json.loads((run_dir / "summary.json").read_text())
    counts = {(p["name"], p["parent"]): p["count"] for p in summary["phases"]}
    counts[("cycle", None)] = summary["cycle"]["count"]
    return {k: sorted(v) for k, v in shapes.items()}, counts


@pytest.fixture
def read_only_site(site, tmp_path):  # noqa: F811
    copy = tmp_path / "ro-site"
    # without the compiled files earlier runs left in the shared site: none may appear after
    shutil.copytree(site, copy, symlinks=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    subprocess.run(["chmod", "-R", "a-w", str(copy)], check=True)
    yield copy
    subprocess.run(["chmod", "-R", "u+w", str(copy)], check=True)


def test_import_mode_same_records_tree_untouched(site, read_only_site, tmp_path):  # noqa: F811
    before = tree_hashes(read_only_site)
    kw = dict(size="ci", stream=io.StringIO(), timeout=300, warmup=False, chart=False)
    imported = run_default(tmp_path / "import", site=read_only_site, mode="import", **kw)
    assert tree_hashes(read_only_site) == before
    assert not (read_only_site / PHASE_TIMER).exists() and not (read_only_site / ".patchkit").exists()
    assert not [p for p in read_only_site.rglob("*") if p.suffix == ".pyc" or p.name == "__pycache__"]
    log = (imported.run_dir / "workload.log").read_text()
    assert "patchkit import mode: 3 modules patched in memory" in log
    assert (imported.run_dir / "import-hook" / "hook.json").is_file()

    sed = run_default(tmp_path / "sed", site=site, **kw)
    shapes, counts = _records(imported.run_dir)
    assert counts[("cycle", None)] > 0
    assert (shapes, counts) == _records(sed.run_dir)


def test_import_mode_refuses_a_drifted_site(site, tmp_path):  # noqa: F811
    copy = tmp_path / "drifted"
    shutil.copytree(site, copy, symlinks=True)
    utils = copy / "transformers/generation/utils.py"
    utils.write_bytes(utils.read_bytes() + b"# drift\n")
    before = tree_hashes(copy)
    with pytest.raises(ProfileError, match=r"patch.status says drifted"):
        run_default(tmp_path / "out", site=copy, mode="import", size="ci", stream=io.StringIO(), warmup=False)
    assert tree_hashes(copy) == before
