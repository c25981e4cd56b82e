"""patchkit gives the same bytes as `git apply` and reverts byte-exactly, under GNU and BusyBox sed.

Property tests generate files and edits, let real git make the diff at several context sizes,
apply with `git apply` and with patchkit (GNU sed via /bin/sh, and BusyBox sh + sed), compare.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from patchkit import ops
from support.engine import busybox_local, git_apply_result, git_diff, make_series, read_tree, write_tree

TRICKY = [
    "",
    " ",
    "\t",
    "\tindented",
    "    four",
    "trailing  ",
    "a\\b",
    "\\",
    "\\\\",
    "+plus",
    "-minus",
    "- ",
    "-- ",
    "--- x",
    "+++ y",
    "#hash",
    "# comment",
    "&amp",
    "a/b/c",
    "/",
    "ü日本語",
    "x",
    "it's",
    '"dq"',
    "$HOME `cmd` $(cmd)",
    "\\n\\t",
    "%s %d %%",
    "@pk error 1 fake",
    "w /tmp/evil",
    "}",
    "{",
    "s/a/b/",
    "d",
    "1d",
    "p",
    "\\\r",
    "line;rm -rf /",
    "é",
    "\x0c formfeed",
    "tab\tin\tmiddle",
]

line_st = st.one_of(
    st.sampled_from(TRICKY),
    st.text(
        alphabet=st.characters(blacklist_characters="\n\r\x00", blacklist_categories=("Cs",)), max_size=12
    ),
)


@st.composite
def file_pair(draw):
    lines = draw(st.lists(line_st, max_size=18))
    crlf = draw(st.booleans()) if lines else False
    end = "\r\n" if crlf else "\n"
    final_nl = draw(st.booleans()) if lines else True
    new = list(lines)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["ins", "del", "rep"]))
        if op == "ins" or not new:
            pos = draw(st.integers(0, len(new)))
            new[pos:pos] = draw(st.lists(line_st, min_size=1, max_size=3))
        elif op == "del":
            pos = draw(st.integers(0, len(new) - 1))
            del new[pos : pos + draw(st.integers(1, 3))]
        else:
            pos = draw(st.integers(0, len(new) - 1))
            new[pos : pos + draw(st.integers(1, 2))] = draw(st.lists(line_st, min_size=1, max_size=3))
    new_final_nl = draw(st.booleans()) if new else True

    def join(ls, nl):
        text = end.join(ls) + (end if ls and nl else "")
        return text.encode("utf-8", "surrogatepass")

    return join(lines, final_nl), join(new, new_final_nl)


def git_u0_quirk(before: bytes | None, ours: bytes) -> bytes | None:
    """What `git apply --unidiff-zero` makes of a -U0 hunk that deletes the unterminated last
    line Y when the line before it is Y followed only by spaces, tabs or CRs: git matches the
    hunk one line early, deletes that line and keeps Y. Tried with git 2.39: "0\\n0", "0\\r\\n0",
    "0 \\n0", "0\\r\\r\\n0" with the last "0" deleted all give "0"; "0\\n0 ", " 0\\n0", "0\\x0b\\n0",
    "0\\n1\\n0" are applied right. patchkit applies the hunk where the diff says. None when the
    quirk does not apply (then git must agree with the diff)."""
    if before is None or before.endswith(b"\n") or not ours.endswith(b"\n"):
        return None
    last = before.rsplit(b"\n", 1)[-1]
    prev = ours[:-1].rsplit(b"\n", 1)[-1]
    if prev.rstrip(b" \t\r") != last:
        return None
    return ours[: len(ours) - len(prev) - 1] + last


U0_CASES = [  # (before, after): the last line deleted by a -U0 diff; quirk expected or not
    (b"0\n0", b"0\n", True),
    (b"0\r\n0", b"0\r\n", True),
    (b"0 \n0", b"0 \n", True),
    (b"0\t\n0", b"0\t\n", True),
    (b"0\r\r\n0", b"0\r\r\n", True),
    (b"a\n0\r\n0", b"b\n0\r\n", True),
    (b"0\n0 ", b"0\n", False),
    (b" 0\n0", b" 0\n", False),
    (b"0\x0b\n0", b"0\x0b\n", False),
    (b"0\n1\n0", b"0\n1\n", False),
    (b"00\n0", b"00\n", False),
]


@pytest.mark.parametrize("before, after, quirk", U0_CASES)
def test_git_u0_quirk_is_what_git_does(tmp_path, busybox_bin, before, after, quirk):
    """The model the property test explains git's disagreements with, checked against the git
    installed here; patchkit itself applies every one of these to `after` (the roundtrip)."""
    patch = git_diff({"f.txt": before}, {"f.txt": after}, tmp_path / "diff", 0)
    assert b"\\ No newline" in patch
    got = git_apply_result({"f.txt": before}, patch, tmp_path / "apply")["f.txt"]
    model = git_u0_quirk(before, after)
    assert (model is not None) == quirk
    assert got == (model if quirk else after), (before, after, got)
    (tmp_path / "rt").mkdir()
    roundtrip(tmp_path / "rt", {"f.txt": before}, {"f.txt": after}, 0, busybox_bin)


def roundtrip(work: Path, before: dict, after: dict, context: int, busybox_bin: Path | None):
    pinned = {k: v for k, v in before.items() if v is not None}
    patch = git_diff(before, after, work, context)
    if not patch:
        return
    expected = git_apply_result(before, patch, work)
    series = make_series(work / "series", pinned, [("0001.patch", patch)])
    shells = [("gnu", None)] + ([("busybox", busybox_bin)] if busybox_bin else [])
    for label, bb in shells:
        root = work / f"target-{label}"
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir()
        write_tree(root, pinned)
        target = busybox_local(bb, root) if bb else str(root)
        res = ops.apply(str(series), [target])
        assert res.exit_code == 0, (label, res.to_json(), patch.decode("utf-8", "replace"))
        got = read_tree(root, before.keys())
        # The truth is the tree the diff was made from. git apply agrees with it except for one
        # quirk of -U0 diffs that delete an unterminated last line (git_u0_quirk).
        assert got == after, (label, patch)
        if expected != after:
            assert context == 0 and b"\\ No newline" in patch, (expected, after, patch)
            for path in after:
                if expected[path] != after[path]:
                    quirk = git_u0_quirk(before[path], after[path])
                    assert quirk is not None and expected[path] == quirk, (label, path, patch, expected[path])
        st_ = ops.status(str(series), [busybox_local(bb, root) if bb else str(root)])
        assert st_.hosts[0].state == "applied"
        res = ops.revert(str(series), [busybox_local(bb, root) if bb else str(root)])
        assert res.exit_code == 0, res.to_json()
        assert read_tree(root, before.keys()) == before, label
        shutil.rmtree(work / "series", ignore_errors=False) if label == shells[-1][0] else None


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pair=file_pair(), pair2=file_pair(), context=st.sampled_from([0, 1, 3]), create=st.booleans())
# the case a CI run drew, where git's result was not ours with a newline taken out
@example(pair=(b"", b""), pair2=(b"0\r\n0", b"0\r\n"), context=0, create=False)
def test_matches_git_apply(tmp_path_factory, busybox_bin, pair, pair2, context, create):
    work = tmp_path_factory.mktemp("prop")
    (a0, a1), (b0, b1) = pair, pair2
    before = {"pkg/a.py": a0, "pkg/sub/b.txt": b0}
    after = {"pkg/a.py": a1, "pkg/sub/b.txt": b1}
    if create:
        before["pkg/new_mod.py"] = None
        after["pkg/new_mod.py"] = a1 + b"# new\n"
    if a0 == a1 and b0 == b1 and not create:
        return
    # Unchanged files must not be pinned-but-untouched in a way git would skip: keep both pinned.
    roundtrip(work, before, after, context, busybox_bin)


CASES = {
    "insert-before-line-1": (b"a\nb\n", b"new\na\nb\n"),
    "delete-last-line": (b"a\nb\nc\n", b"a\nb\n"),
    "delete-last-line-noeol": (b"a\nb\nc", b"a\nb\n"),
    "add-final-newline": (b"a\nb", b"a\nb\n"),
    "remove-final-newline": (b"a\nb\n", b"a\nb"),
    "append-after-noeol": (b"a\nb", b"a\nb\nc\n"),
    "append-keep-noeol": (b"a\nb", b"a\nb\nc"),
    "crlf": (b"a\r\nb\r\nc\r\n", b"a\r\nX\r\nc\r\n"),
    "tabs-backslashes": (b"x\n\ty\n", b"x\n\t\\t\\\\ \\\n\ty\n"),
    "leading-blanks": (b"x\n", b"   x\n\t\t\n \n"),
    "diff-like-lines": (b"x\n", b"+x\n-y\n#z\n@@ -1 +1 @@\n"),
    "utf8": ("å\n".encode(), "å\nß∂ƒ 😀\n".encode()),
    "empty-lines": (b"\n\n\n", b"\n\nx\n\n\n"),
    "empty-to-content": (b"", b"a\nb\n"),
    "content-to-empty": (b"a\nb\n", b""),
    "single-noeol-line": (b"only", b"first\nonly"),
    "sed-specials": (b"a\n", b"a\n&\n/\n\\1\n.*\n^$\n"),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("context", [0, 3])
def test_named_edge_cases(tmp_path, busybox_bin, name, context):
    old, new = CASES[name]
    roundtrip(tmp_path, {"f.txt": old}, {"f.txt": new}, context, busybox_bin)


def test_whole_file_deletion_and_creation(tmp_path, busybox_bin):
    before = {"gone.py": b"x = 1\ny = 2\n", "keep.py": b"k\n", "d/new.py": None}
    after = {"gone.py": None, "keep.py": b"k\nk2\n", "d/new.py": b"print('hi')\n"}
    roundtrip(tmp_path, before, after, 3, busybox_bin)


def test_git_header_only_diffs_and_modes(tmp_path, busybox_bin):
    """Real `git diff` output for an empty new file, a deleted empty file, an executable new
    file without a final newline and a path with spaces (git ends its +++ line with a tab)."""
    import os
    import stat

    before = {
        "keep.py": b"k\n",
        "empty.txt": b"",
        "new empty": None,
        "run.sh": None,
        "my dir/my file.py": None,
    }
    after = {
        "keep.py": b"k\nk2\n",
        "empty.txt": None,
        "new empty": b"",
        "run.sh": b"#!/bin/sh\necho hi",
        "my dir/my file.py": b"x\ny\n",
    }
    work = tmp_path / "w"
    repo = work / "diffrepo"
    patch = git_diff(before, after, work)
    # git_diff's repo does not mark run.sh executable; make the diff say 100755 like git would
    patch = patch.replace(
        b"diff --git a/run.sh b/run.sh\nnew file mode 100644",
        b"diff --git a/run.sh b/run.sh\nnew file mode 100755",
    )
    assert b"new file mode 100755" in patch and b"b/my dir/my file.py\t" in patch
    pinned = {k: v for k, v in before.items() if v is not None}
    series = make_series(work / "series", pinned, [("0001.patch", patch)])
    for label, bb in [("gnu", None), ("busybox", busybox_bin)]:
        root = work / f"t-{label}"
        write_tree(root, pinned)
        target = busybox_local(bb, root) if bb else str(root)
        res = ops.apply(str(series), [target])
        assert res.exit_code == 0, res.to_json()
        assert read_tree(root, after.keys()) == after
        assert os.stat(root / "run.sh").st_mode & stat.S_IXUSR
        res = ops.revert(str(series), [busybox_local(bb, root) if bb else str(root)])
        assert res.exit_code == 0, res.to_json()
        assert read_tree(root, before.keys()) == before
    assert repo.exists()


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("context", [0, 3])
def test_files_with_many_edits(tmp_path, busybox_bin, seed, context):
    """A file with about a hundred edited places (inserts, deletions, replacements, at the first
    and after the last line) next to a small one, in one chunk, under GNU and BusyBox sed."""
    import random

    rnd = random.Random(seed)
    lines = [b"line %d %s" % (i, rnd.choice([b"", b"\\", b"&", b"/x/", b"\t"])) for i in range(1, 401)]
    new: list[bytes] = []
    for i, ln in enumerate(lines):
        op = rnd.random()
        if i == 0 and seed % 2:
            new.append(b"before first")
        if op < 0.08:
            continue  # deleted
        if op < 0.16:
            new.append(ln + b" changed")  # replaced
        else:
            new.append(ln)
        if 0.16 <= op < 0.24:
            new += [b"added after %d" % i, b"and %d" % i]  # inserted
    if seed >= 2:
        new.append(b"after last")
    before = {"big.py": b"\n".join(lines) + b"\n", "small.py": b"a\nb\n"}
    after = {"big.py": b"\n".join(new) + b"\n", "small.py": b"a\nB\n"}
    roundtrip(tmp_path, before, after, context, busybox_bin)


def test_modified_files_keep_their_modes(tmp_path, busybox_bin):
    """A patched file keeps its original's mode (executable, group-writable, read-only), and
    revert brings back the original file itself: same inode, mode and mtime."""
    import os

    names = {"bin/run.sh": 0o755, "lib/shared.py": 0o664, "lib/ro.py": 0o444, "a/x/run.sh": 0o700}
    before = {n: b"l1\nl2\nl3\n" for n in names}
    after = {n: b"l1\nL2\nl3\n" for n in names}
    work = tmp_path / "w"
    series = make_series(work / "series", before, [("0001.patch", git_diff(before, after, work))])
    for label, bb in [("gnu", None), ("busybox", busybox_bin)]:
        root = work / f"t-{label}"
        write_tree(root, before)
        for n, mode in names.items():
            os.chmod(root / n, mode)
        orig = {n: os.stat(root / n) for n in names}
        target = busybox_local(bb, root) if bb else str(root)
        res = ops.apply(str(series), [target])
        assert res.exit_code == 0, res.to_json()
        assert read_tree(root, after.keys()) == after
        for n, mode in names.items():
            assert os.stat(root / n).st_mode & 0o7777 == mode, (label, n)
        res = ops.revert(str(series), [busybox_local(bb, root) if bb else str(root)])
        assert res.exit_code == 0, res.to_json()
        assert read_tree(root, before.keys()) == before
        for n in names:
            st = os.stat(root / n)
            assert (st.st_ino, st.st_mode, st.st_mtime_ns) == (
                orig[n].st_ino,
                orig[n].st_mode,
                orig[n].st_mtime_ns,
            ), (label, n)


def test_git_format_patch_files_apply(tmp_path):
    """`git format-patch` output: mail headers, diffstat, and the "-- " signature at the end."""
    from support.engine import git

    repo = tmp_path / "repo"
    repo.mkdir()
    before = b"".join(b"%d\n" % i for i in range(1, 11))
    (repo / "a.txt").write_bytes(before)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    after = before.replace(b"5\n", b"five\n- \n")
    (repo / "a.txt").write_bytes(after)
    git(repo, "commit", "-qam", "change five")
    name = git(repo, "format-patch", "-1", "-o", str(tmp_path / "out")).stdout.decode().strip()
    patch = open(name, "rb").read()
    assert patch.rstrip().endswith(b"-- \n" + patch.rstrip().split(b"\n")[-1])
    series = make_series(tmp_path / "series", {"a.txt": before}, [("0001.patch", patch)])
    root = tmp_path / "t"
    write_tree(root, {"a.txt": before})
    assert ops.apply(str(series), [str(root)]).exit_code == 0
    assert (root / "a.txt").read_bytes() == after
