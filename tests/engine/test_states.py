"""One word per state, whichever task looks: pristine | applied | partial | modified | drifted for
a target (and a file), the same in status, check, verify, apply, revert, their --json and the
docs. Through the real CLI on a small tree (no wheels)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from patchkit import ops
from patchkit.engine.host_result import TARGET_STATES, FileState, HostState
from support.cli import invoke
from support.engine import make_series, write_tree

REPO = Path(__file__).resolve().parents[2]
ORIG = b"".join(b"line %d\n" % i for i in range(1, 21))
GOOD = (
    b"diff --git a/pkg/m.py b/pkg/m.py\n--- a/pkg/m.py\n+++ b/pkg/m.py\n"
    b"@@ -4,3 +4,4 @@\n line 4\n line 5\n+inserted\n line 6\n"
)
OTHER = b"x\n"
ADD_OTHER = (
    b"diff --git a/pkg/other.py b/pkg/other.py\n--- a/pkg/other.py\n+++ b/pkg/other.py\n"
    b"@@ -1 +1,2 @@\n x\n+y\n"
)


@pytest.fixture
def target(tmp_path) -> Path:
    root = tmp_path / "target"
    write_tree(root, {"pkg/m.py": ORIG, "pkg/other.py": OTHER})
    return root


def two_file_series(tmp_path, name="s", extra=b"") -> Path:
    return make_series(
        tmp_path / name,
        {"pkg/m.py": ORIG, "pkg/other.py": OTHER},
        [("0001.patch", GOOD.replace(b"+inserted", b"+inserted" + extra)), ("0002.patch", ADD_OTHER)],
    )


def run(task: str, series: Path, target: Path, *more: str):
    text = invoke(task, "--series", str(series), "--target", str(target), *more)
    doc = json.loads(invoke(task, "--series", str(series), "--target", str(target), "--json", *more).stdout)
    return text, doc


def row_state(stdout: str, target: Path) -> str:
    row = next(ln for ln in stdout.splitlines() if ln.startswith(str(target)))
    return row[len(str(target)) :].split()[0]


def file_states(doc: dict) -> dict[str, str]:
    return {f["path"]: f["state"] for f in doc["hosts"][0]["files"]}


def test_a_hand_edit_after_apply_is_modified_for_every_task(tmp_path, target):
    series = two_file_series(tmp_path)
    assert invoke("patch.apply", "--series", str(series), "--target", str(target)).returncode == 0
    edited = (target / "pkg/m.py").read_bytes() + b"# by hand\n"
    (target / "pkg/m.py").write_bytes(edited)
    for task, code in [
        ("patch.status", 0),
        ("patch.verify", 1),
        ("patch.check", 1),
        ("patch.apply", 1),
        ("patch.revert", 1),
    ]:
        text, doc = run(task, series, target)
        assert text.returncode == code == doc["exit_code"], (task, text.stdout)
        assert row_state(text.stdout, target) == "modified", (task, text.stdout)
        assert doc["hosts"][0]["state"] == "modified", task
        assert file_states(doc) == {"pkg/m.py": "modified", "pkg/other.py": "applied"}, (task, doc)
        assert "drifted" not in text.stdout and "@@" not in text.stdout, (task, text.stdout)
    text, _ = run("patch.verify", series, target)
    assert "files were modified after apply" in text.stdout, text.stdout
    assert (target / "pkg/m.py").read_bytes() == edited


def test_a_pristine_file_is_pristine_for_every_task(tmp_path, target):
    series = two_file_series(tmp_path)
    for task in ("patch.status", "patch.verify", "patch.check"):
        text, doc = run(task, series, target)
        assert text.returncode == 0, text.stdout
        assert row_state(text.stdout, target) == "pristine"
        assert "  pkg/m.py: pristine" in text.stdout, (task, text.stdout)
        assert file_states(doc) == {"pkg/m.py": "pristine", "pkg/other.py": "pristine"}, (task, doc)


def test_another_version_applied_is_applied_not_drifted(tmp_path, target):
    old, new = two_file_series(tmp_path, "old"), two_file_series(tmp_path, "new", extra=b" v2")
    assert invoke("patch.apply", "--series", str(old), "--target", str(target)).returncode == 0
    for task in ("patch.verify", "patch.check"):
        text, doc = run(task, new, target)
        assert text.returncode == 1, text.stdout
        assert row_state(text.stdout, target) == "applied" == doc["hosts"][0]["state"], text.stdout
        assert "the target carries patchkit state (applied, series old " in text.stdout
        assert file_states(doc) == {"pkg/m.py": "applied", "pkg/other.py": "applied"}
    assert run("patch.status", new, target)[1]["hosts"][0]["state"] == "applied"


def test_saved_state_of_a_stopped_apply_leaves_the_files_pristine(tmp_path, target):
    """A fleet's first phase (staged, not committed) leaves a manifest and the originals: check and
    verify still compare the files with the pin, and call them what status calls them."""
    series = two_file_series(tmp_path)
    from patchkit.engine.compilecache import compiled_series
    from patchkit.transport import LocalTransport

    staged = ops.run_on(
        compiled_series(str(series)),
        LocalTransport(label=str(target), root=str(target)),
        "apply",
        ops.Options(),
        "stage",
    )
    assert staged.state == "staged" and (target / ".patchkit" / "manifest").is_file()
    for task in ("patch.status", "patch.verify", "patch.check"):
        text, doc = run(task, series, target)
        assert text.returncode == 0, (task, text.stdout)
        assert doc["hosts"][0]["state"] == "pristine", (task, doc)
        assert set(file_states(doc).values()) == {"pristine"}, (task, doc)


def test_the_docs_name_every_state_the_json_can_hold():
    """docs/tasks.md's JSON section lists the target states first, then what else a host's or a
    file's `state` can say; the code's enums and the docs hold the same words."""
    text = (REPO / "docs" / "tasks.md").read_text(encoding="utf-8")
    host = re.search(r"^\| `hosts\[\]\.state` \| (.+) \|$", text, re.M)
    files = re.search(r"^\| `hosts\[\]\.files\[\]\.state` \| (.+) \|$", text, re.M)
    assert host and files, "docs/tasks.md: the JSON table's state rows"
    assert re.findall(r"`([a-z-]+)`", host.group(1)) == [s.value for s in HostState]
    assert re.findall(r"`([a-z-]+)`", files.group(1)) == [s.value for s in FileState]
    assert [s.value for s in TARGET_STATES] == ["pristine", "applied", "partial", "modified", "drifted"]
    design_words = "pristine / applied / partial / modified / drifted"
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert design_words in text.replace("`", "") and design_words in readme
