"""Pure planning and rendering: stacked patches, disagreements, the sed text itself."""

from __future__ import annotations

import hashlib

import pytest

from patchkit import ops
from patchkit.engine.diffparse import parse_patch
from patchkit.engine.plan import is_new, plan_series
from patchkit.engine.render import dispatch, rhs, stage_edit
from patchkit.engine.series import load_series
from patchkit.errors import InvalidInput
from support.engine import git_apply_result, git_diff, make_series, read_tree, write_tree

BASE = b"".join(b"l%d\n" % i for i in range(1, 11))


def test_stacked_patches_compose_into_one_edit(tmp_path):
    step1 = BASE.replace(b"l3\n", b"l3\nA\n")
    step2 = step1.replace(b"A\n", b"A\nB\n").replace(b"l9\n", b"")
    p1 = git_diff({"f": BASE}, {"f": step1}, tmp_path / "1")
    p2 = git_diff({"f": step1}, {"f": step2}, tmp_path / "2")
    series = make_series(tmp_path / "s", {"f": BASE}, [("01.patch", p1), ("02.patch", p2)])
    plans = plan_series(load_series(str(series)))
    assert len(plans) == 1
    final = plans[0].final
    assert [it.text for it in final if is_new(it)] == [b"A", b"B"]
    assert plans[0].deleted == [9]
    root = tmp_path / "t"
    write_tree(root, {"f": BASE})
    assert ops.apply(str(series), [str(root)]).exit_code == 0
    assert read_tree(root, ["f"])["f"] == step2


def test_later_patch_must_match_what_earlier_patch_inserted(tmp_path):
    step1 = BASE.replace(b"l3\n", b"l3\nA\n")
    p1 = git_diff({"f": BASE}, {"f": step1}, tmp_path / "1")
    wrong = step1.replace(b"A\n", b"Z\n")
    p2 = git_diff({"f": wrong}, {"f": wrong.replace(b"l5\n", b"l5\nC\n")}, tmp_path / "2")
    series = make_series(tmp_path / "s", {"f": BASE}, [("01.patch", p1), ("02.patch", p2)])
    with pytest.raises(InvalidInput, match="earlier patch of the series left"):
        plan_series(load_series(str(series)))


def test_patches_disagreeing_about_an_original_line(tmp_path):
    step1 = BASE.replace(b"l2\n", b"l2\nX\n")
    p1 = git_diff({"f": BASE}, {"f": step1}, tmp_path / "1")  # context says line 4 is 'l4'
    other = step1.replace(b"l4\n", b"four\n")
    p2 = git_diff({"f": other}, {"f": other.replace(b"four\n", b"four\nY\n")}, tmp_path / "2")
    series = make_series(tmp_path / "s", {"f": BASE}, [("01.patch", p1), ("02.patch", p2)])
    with pytest.raises(InvalidInput, match="disagree about original line 4"):
        plan_series(load_series(str(series)))


def test_rhs_escapes_everything_sed_would_interpret():
    assert rhs([b"a\\b", b"&/x"]) == "a\\\\b\\\n\\&\\/x"


def test_stage_edit_is_line_addressed(tmp_path):
    new = BASE.replace(b"l1\n", b"first\nl1\n").replace(b"l5\n", b"five\n").replace(b"l10\n", b"")
    patch = git_diff({"f": BASE}, {"f": new}, tmp_path, context=0)
    series = make_series(tmp_path / "s", {"f": BASE}, [("p", patch)])
    plan = plan_series(load_series(str(series)))[0]
    cmds = stage_edit(plan).commands
    assert "1s/^/first\\\n/" in cmds
    assert "5s/.*/five/" in cmds
    assert "10d" in cmds
    assert all(c[0].isdigit() for c in cmds)  # never a pattern address


def test_dispatch_tree_reaches_every_range_and_stays_small():
    items = [(i * 10 + 1, i * 10 + 5, f"w{i}") for i in range(300)]
    lines = dispatch(items, "g", fanout=16)
    assert sum(1 for ln in lines if ln.startswith(":g")) > 0
    for lo, hi, label in items:
        assert f"{lo},{hi}b {label}" in lines
    # small: sed tests a line against at most fanout * depth ranges (3 levels of 16 for 300
    # items) before it jumps to its own label, where a flat list would test up to 300
    jumps = {ln[1:]: i for i, ln in enumerate(lines) if ln.startswith(":")}
    worst = 0
    for lo, hi, label in items:
        for x in (lo, hi):
            at, tests = 0, 0
            while True:
                ln = lines[at]
                assert ln != "d", f"line {x} fell through to a delete"
                if ln.startswith(":"):
                    at += 1
                    continue
                rng, target = ln.split("b ", 1)
                a, b = (int(v) for v in rng.split(","))
                tests += 1
                if a <= x <= b:
                    if target == label:
                        break
                    at = jumps[target] + 1
                else:
                    at += 1
            worst = max(worst, tests)
    assert worst <= 16 * 3, worst
    assert len(lines) < 3 * len(items)  # linear in the items (labels and jumps)


def test_git_quoted_paths_and_crlf_lines_are_exact():
    patch = (
        b'diff --git "a/dir/sp ace\\tx.py" "b/dir/sp ace\\tx.py"\n'
        b'--- "a/dir/sp ace\\tx.py"\n+++ "b/dir/sp ace\\tx.py"\n'
        b"@@ -1,2 +1,2 @@\n a\r\n-b\r\n+c\r\n"
    )
    with pytest.raises(InvalidInput, match="control character"):
        parse_patch("q.patch", patch)  # a tab in a path is refused, after unquoting
    ok = patch.replace(b"\\t", b"_")
    fd = parse_patch("q.patch", ok).files[0]
    assert fd.path == "dir/sp ace_x.py"
    assert [ln.text for ln in fd.hunks[0].lines] == [b"a\r", b"b\r", b"c\r"]


@pytest.mark.wheels
def test_real_upstream_files_both_ways(tmp_path):
    """sglang 0.5.9 <-> 0.5.10 speculative/*.py from the real wheels, applied both ways."""
    from support.upstream import sglang_files

    names = [
        "sglang/srt/speculative/eagle_worker.py",
        "sglang/srt/speculative/eagle_info.py",
        "sglang/srt/speculative/spec_info.py",
        "sglang/srt/speculative/eagle_utils.py",
    ]
    old, new = sglang_files("0.5.9", names), sglang_files("0.5.10", names)
    for a, b, label in ((old, new, "forward"), (new, old, "backward")):
        patch = git_diff(a, b, tmp_path / label)
        expected = git_apply_result(a, patch, tmp_path / label)
        series = make_series(tmp_path / f"s-{label}", a, [("up.patch", patch)])
        root = tmp_path / f"t-{label}"
        write_tree(root, a)
        res = ops.apply(str(series), [str(root)])
        assert res.exit_code == 0, res.to_json()
        assert read_tree(root, a.keys()) == expected == b
        assert ops.revert(str(series), [str(root)]).exit_code == 0
        assert read_tree(root, a.keys()) == a
        # reverted, the target is the pinned text again: verify finds every file as pinned
        pinned = {e.path: e.sha256 for e in load_series(str(series)).pin.files.values()}
        assert pinned == {p: hashlib.sha256(d).hexdigest() for p, d in a.items()}
        assert ops.verify(str(series), [str(root)]).exit_code == 0
