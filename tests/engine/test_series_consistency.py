"""A series that does not fit its own pinned text is the series' fault, not the target's: on a
target holding the pinned file (sha256 and wc -l), a hunk that still does not match is reported
as "this series is inconsistent" (exit 2, invalid input), never as drift, and the target is left
byte-identical. Every "moved" figure agrees with the line numbers printed beside it. Through the
real CLI, on small trees (no wheels) and on the real sglang 0.5.9 files (the wheel fixture)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from support.cli import invoke
from support.engine import make_series, write_tree
from support.upstream import SERIES_059

ORIG = b"".join(b"line %d\n" % i for i in range(1, 21))
# 0001 inserts after line 5 and after line 10; 0002's numbers count both insertions (line 14 of
# the pinned file is line 16 once 0001 is applied).
HUNK_A = b"@@ -4,3 +4,4 @@\n line 4\n line 5\n+first\n line 6\n"
HUNK_B = b"@@ -10,3 +11,4 @@\n line 10\n line 11\n+second\n line 12\n"
HEAD = b"diff --git a/pkg/m.py b/pkg/m.py\n--- a/pkg/m.py\n+++ b/pkg/m.py\n"
P0001 = HEAD + HUNK_A + HUNK_B
P0002 = HEAD + b"@@ -16,3 +16,4 @@\n line 14\n line 15\n+third\n line 16\n"
MOVED = re.compile(r"its (\d+) lines, pinned at line (\d+), now start at line (\d+) \(([+-]\d+) lines\)")


def tree(root: Path, data: bytes = ORIG) -> Path:
    write_tree(root, {"pkg/m.py": data, "pkg/other.py": b"x\n"})
    return root


def snapshot(root: Path) -> dict:
    """Every path below root, and the bytes of each file (a .patchkit/ left behind shows too)."""
    return {
        str(p.relative_to(root)): p.read_bytes() if p.is_file() else None for p in sorted(root.rglob("*"))
    }


def series(tmp_path: Path, first: bytes, name: str = "s") -> Path:
    return make_series(tmp_path / name, {"pkg/m.py": ORIG}, [("0001.patch", first), ("0002.patch", P0002)])


@pytest.mark.parametrize("task", ["patch.verify", "patch.apply", "patch.apply --dry-run"])
def test_a_series_missing_a_hunk_is_inconsistent_not_a_drifted_target(tmp_path, task):
    broken = series(tmp_path, HEAD + HUNK_A)  # 0001 lost its second hunk; 0002 still counts it
    target = tree(tmp_path / "t")
    before = snapshot(target)
    proc = invoke(*task.split(), "--series", str(broken), "--target", str(target))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert (
        "this series is inconsistent: hunk 1 of 0002.patch (@@ -16,3 +16,4 @@) does not match the "
        "pinned upstream pkg/m.py, which the target holds (sha256 and wc -l as pinned): its lines are "
        "at line 14 of that file, but the patches before it add 1 line above them, where its header "
        "(line 16) counts on 2"
    ) in out
    assert "drifted" not in out
    assert "pkg/m.py: pristine — sha256 and wc -l as pinned; 1 hunk of the series does not fit it" in out
    assert (
        "0002.patch @@ -16,3 +16,4 @@: moved: its 3 lines, pinned at line 15, now start at line 14 (-1 lines)"
        in out
    )
    row = next(ln for ln in proc.stdout.splitlines() if ln.startswith(str(target)))
    assert row.split()[1:2] == ["pristine"] and "INVALID" in row, row
    assert snapshot(target) == before


def test_the_json_document_says_the_same(tmp_path):
    whole = tree(tmp_path / "whole")  # with both hunks of 0001, the series fits its pinned text
    proc = invoke("patch.apply", "--series", str(series(tmp_path, P0001, "whole")), "--target", str(whole))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    broken = series(tmp_path, HEAD + HUNK_A)
    target = tree(tmp_path / "t")
    proc = invoke("patch.verify", "--series", str(broken), "--target", str(target), "--json")
    doc = json.loads(proc.stdout)
    assert proc.returncode == 2 and doc["exit_code"] == 2
    host = doc["hosts"][0]
    assert host["state"] == "pristine" and host["exit_code"] == 2
    assert doc["error"].startswith(f"{target}: this series is inconsistent: hunk 1 of 0002.patch ")
    m = next(f for f in host["files"] if f["path"] == "pkg/m.py")
    assert m["state"] == "pristine" and len(m["hunks"]) == 1


def test_a_hunk_whose_context_is_wrong_names_the_line(tmp_path):
    """A hunk edited by hand (a context line that the pinned file never had)."""
    bad = P0001.replace(b" line 11\n+second", b" line eleven\n+second")
    target = tree(tmp_path / "t")
    before = snapshot(target)
    proc = invoke("patch.apply", "--series", str(series(tmp_path, bad)), "--target", str(target))
    assert proc.returncode == 2, proc.stdout
    assert (
        "this series is inconsistent: hunk 2 of 0001.patch (@@ -10,3 +11,4 @@) does not match the "
        "pinned upstream pkg/m.py"
    ) in proc.stdout
    assert "changed: line 11: expected 'line eleven', found 'line 11'" in proc.stdout
    assert snapshot(target) == before


def test_every_moved_figure_agrees_with_its_line_numbers(tmp_path):
    """Each hunk's lines moved down by one; the later patch's header counts the earlier one's
    insertions, so its header line (16) is not the pinned line (14) the figure is taken from."""
    shifted = b"added\n" + ORIG
    target = tree(tmp_path / "t", shifted)
    proc = invoke("patch.verify", "--series", str(series(tmp_path, P0001)), "--target", str(target))
    assert proc.returncode == 1, proc.stdout  # not the pinned text: drift, as ever
    assert "inconsistent" not in proc.stdout and "pkg/m.py: drifted" in proc.stdout
    moved = MOVED.findall(proc.stdout)
    assert len(moved) == 3, proc.stdout
    pinned, now = ORIG.split(b"\n"), shifted.split(b"\n")
    for count, at, start, delta in moved:
        at, start, delta = int(at), int(start), int(delta)
        assert start - at == delta == 1
        assert now[start - 1 : start - 1 + int(count)] == pinned[at - 1 : at - 1 + int(count)]
    assert (
        "0002.patch @@ -16,3 +16,4 @@: moved: its 3 lines, pinned at line 14, now start at line 15"
        in proc.stdout
    )


def test_a_pin_whose_line_count_contradicts_its_sha256_is_inconsistent(tmp_path):
    broken = series(tmp_path, P0001)
    pin = broken / "pin.toml"
    pin.write_text(pin.read_text().replace("lines = 20", "lines = 21"))
    target = tree(tmp_path / "t")
    before = snapshot(target)
    proc = invoke("patch.apply", "--series", str(broken), "--target", str(target))
    assert proc.returncode == 2, proc.stdout
    assert (
        "this series is inconsistent: pin.toml gives pkg/m.py the sha256 of a file of 20 lines "
        "(wc -l), but says lines = 21"
    ) in proc.stdout
    assert snapshot(target) == before


# -- the real 0.5.9 series and files ------------------------------------------------------------


def first_hunks(patch: Path, keep: int) -> None:
    """Keep the first ``keep`` hunks of a one-file patch."""
    head, *hunks = re.split(r"(?m)^(?=@@ )", patch.read_text())
    patch.write_text(head + "".join(hunks[:keep]))


def test_the_059_series_without_two_hunks_of_its_verify_patch(tmp_path, sglang_059_checkout):
    broken = tmp_path / "sglang-v0.5.9-broken"
    shutil.copytree(SERIES_059, broken)
    first_hunks(broken / "0005-verify.patch", 3)
    target = sglang_059_checkout
    before = snapshot(target)
    for task in ("patch.apply", "patch.verify"):
        proc = invoke(task, "--series", str(broken), "--target", str(target))
        out = proc.stdout + proc.stderr
        assert proc.returncode == 2, out
        assert (
            "this series is inconsistent: hunk 1 of 0006-draft-extend-after-decode.patch "
            "(@@ -921,6 +921,7 @@) does not match the pinned upstream "
            "python/sglang/srt/speculative/eagle_worker.py, which the target holds (sha256 and wc -l "
            "as pinned): its lines are at line 900 of that file, but the patches before it add 19 "
            "lines above them, where its header (line 921) counts on 21"
        ) in out
        assert "drifted" not in out
        moved = MOVED.findall(out)
        assert len(moved) == 7, out
        assert all(int(start) - int(at) == int(delta) == -2 for _n, at, start, delta in moved), moved
        assert (
            "0007-prefill.patch @@ -895,6 +897,7 @@: moved: its 6 lines, pinned at line 876, now start at line 874 (-2 lines)"
            in out
        )
    assert snapshot(target) == before
