"""patchkit.author.authoring: diff text, the exact applier, new/refresh over a quilt-style stack."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from patchkit.author import authoring, upstream
from patchkit.errors import InvalidInput
from support.upstream import git

BASE = "".join(f"line {i}\n" for i in range(1, 41))
PATH = "python/pkg/mod.py"


def _git_apply(tree: Path, patch_text: str, *extra: str) -> subprocess.CompletedProcess:
    patch = tree.parent / f"{tree.name}.patch"
    patch.write_bytes(patch_text.encode())
    return git(tree, "apply", "-v", *extra, str(patch), check=False)


# ----------------------------------------------------------------------------- diff text


@pytest.mark.parametrize(
    "old,new",
    [
        (BASE, BASE.replace("line 5\n", "line 5\nadded\n")),
        (BASE, BASE.replace("line 1\n", "") + "tail\n"),
        ("a\nb\nc", "a\nb\nc\n"),  # gains a final newline
        ("a\nb\nc\n", "a\nB\nc"),  # loses it
        ("x\r\ny\n", "x\r\nz\r\ny\n"),  # \r stays inside its line
        ("only\n", "first\nonly\n"),
    ],
)
def test_file_diff_applies_with_git_and_with_the_exact_applier(tmp_path, old, new):
    text = authoring.file_diff(PATH, old, new)
    assert text.startswith(f"diff --git a/{PATH} b/{PATH}\n--- a/{PATH}\n+++ b/{PATH}\n@@ ")
    assert authoring.apply_patch({PATH: old}, text, "t")[PATH] == new
    tree = tmp_path / "t"
    (tree / "python/pkg").mkdir(parents=True)
    (tree / PATH).write_bytes(old.encode())
    proc = _git_apply(tree, text)
    assert proc.returncode == 0, proc.stderr
    assert "offset" not in proc.stderr
    assert (tree / PATH).read_bytes() == new.encode()


def test_file_diff_of_equal_texts_is_empty():
    assert authoring.file_diff(PATH, BASE, BASE) == ""


def test_hunk_header_ranges_follow_the_unified_convention():
    text = authoring.file_diff(PATH, "a\n", "a\nb\n")
    assert "@@ -1 +1,2 @@\n a\n+b\n" in text
    text = authoring.file_diff(PATH, "", "new\n")
    assert "@@ -0,0 +1 @@\n+new\n" in text


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.sampled_from(["a\n", "b\n", "\n", "    x = 1\n", "c"]), max_size=30),
    st.lists(st.tuples(st.integers(0, 30), st.sampled_from(["ins\n", "a\n", "\n"])), max_size=6),
    st.lists(st.integers(0, 30), max_size=4),
)
def test_diff_then_apply_round_trips(lines, inserts, deletes):
    lines = [ln if ln.endswith("\n") or i == len(lines) - 1 else ln + "\n" for i, ln in enumerate(lines)]
    old = "".join(lines)
    new_lines = list(lines)
    for pos, text in inserts:
        new_lines.insert(min(pos, len(new_lines)), text)
    for pos in deletes:
        if new_lines:
            del new_lines[min(pos, len(new_lines) - 1)]
    fixed = [
        ln if ln.endswith("\n") or i == len(new_lines) - 1 else ln + "\n" for i, ln in enumerate(new_lines)
    ]
    new = "".join(fixed)
    text = authoring.file_diff(PATH, old, new)
    if old == new:
        assert text == ""
    else:
        assert authoring.apply_patch({PATH: old}, text, "t")[PATH] == new


def test_new_file_patch_matches_git(tmp_path):
    body = "a = 1\r\nb = 2\n# no newline"
    text = authoring.new_file_patch("python/pkg/new.py", body)
    assert text.startswith(
        "diff --git a/python/pkg/new.py b/python/pkg/new.py\n"
        "new file mode 100644\n--- /dev/null\n+++ b/python/pkg/new.py\n"
        "@@ -0,0 +1,3 @@\n"
    )
    assert text.endswith("+# no newline\n\\ No newline at end of file\n")
    tree = tmp_path / "t"
    tree.mkdir()
    assert _git_apply(tree, text).returncode == 0
    assert (tree / "python/pkg/new.py").read_bytes() == body.encode()
    assert authoring.apply_patch({}, text, "t") == {"python/pkg/new.py": body}
    with pytest.raises(InvalidInput):
        authoring.new_file_patch("x", "")


def test_exact_applier_refuses_moved_lines_and_existing_new_files():
    text = authoring.file_diff(PATH, BASE, BASE.replace("line 20\n", "line 20\nadded\n"))
    with pytest.raises(authoring.AuthoringError, match="does not match at line 18"):
        authoring.apply_patch({PATH: "extra\n" + BASE}, text, "p")
    created = authoring.new_file_patch("n.py", "x\n")
    with pytest.raises(authoring.AuthoringError, match="already exists"):
        authoring.apply_patch({"n.py": "x\n"}, created, "p")
    with pytest.raises(InvalidInput, match="contains no diff"):
        authoring.apply_patch({}, "just words\n", "p")


def test_split_header():
    assert authoring.split_header("Hdr\n\ndiff --git a/x b/x\n") == ("Hdr\n\n", "diff --git a/x b/x\n")
    assert authoring.split_header("diff --git a/x b/x\n") == ("", "diff --git a/x b/x\n")


# ----------------------------------------------------------------------------- the stack


@pytest.fixture
def series(tmp_path):
    """A one-file pinned series with no patches, its pristine tree and a work copy."""
    pristine = tmp_path / "pristine"
    (pristine / "python/pkg").mkdir(parents=True)
    (pristine / PATH).write_text(BASE)
    sdir = tmp_path / "series"
    upstream.pin_from_tree(
        pristine, [PATH], "pkg", "1.0", package_prefix="python/", pin_path=sdir / "pin.toml"
    )
    return sdir, pristine


def _edit(tree: Path, path: str, old: str, new: str) -> None:
    target = tree / path
    text = target.read_text()
    assert old in text
    target.write_text(text.replace(old, new, 1))


def _work(series_dir, pristine, tmp_path, name="work", **kw) -> Path:
    dest = tmp_path / name
    if dest.exists():
        shutil.rmtree(dest)
    return authoring.prepare_edit_tree(series_dir, pristine, dest, **kw)


def test_new_patches_stack_with_quilt_semantics(series, tmp_path):
    sdir, pristine = series
    pin_before = (sdir / "pin.toml").read_bytes()
    work = _work(sdir, pristine, tmp_path)
    _edit(work, PATH, "line 10\n", "line 10\nfirst = 1\nfirst = 2\n")
    authoring.new_patch(sdir, "0001-first.patch", work, pristine, header="First timer.\n")
    work = _work(sdir, pristine, tmp_path)
    _edit(work, PATH, "line 30\n", "line 30\nsecond = 1\n")
    (work / "python/pkg/extra.py").write_text("extra = True\n")
    p2 = authoring.new_patch(sdir, "0002-second.patch", work, pristine, new_files=["python/pkg/extra.py"])
    text2 = p2.read_text()
    # Patch 2 counts the two lines patch 1 inserted above it: pristine line 30 is now 32.
    assert "@@ -30,6 +30,7 @@" in text2
    assert "new file mode 100644" in text2
    assert text2.startswith("0002-second.patch: describe")
    assert (sdir / "series").read_text() == "0001-first.patch\n0002-second.patch\n"
    assert (sdir / "pin.toml").read_bytes() == pin_before
    # Real quilt reproduces the edited tree from the pristine one.
    target = tmp_path / "quilt"
    shutil.copytree(pristine, target)
    env = dict(os.environ, QUILT_PATCHES=str(sdir))
    proc = subprocess.run(["quilt", "push", "-a"], cwd=target, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "offset" not in proc.stdout and "fuzz" not in proc.stdout
    for rel in (PATH, "python/pkg/extra.py"):
        assert (target / rel).read_bytes() == (work / rel).read_bytes()


def test_refresh_of_an_unchanged_series_rewrites_nothing(series, tmp_path):
    sdir, pristine = series
    for i, anchor in enumerate(("line 5\n", "line 25\n", "line 38\n"), 1):
        work = _work(sdir, pristine, tmp_path)
        _edit(work, PATH, anchor, anchor + f"t{i}()\n")
        authoring.new_patch(sdir, f"000{i}.patch", work, pristine, header=f"Patch {i}\n\n")
    before = {p.name: p.read_bytes() for p in sdir.iterdir()}
    for name in ("0001.patch", "0002.patch", "0003.patch"):
        work = _work(sdir, pristine, tmp_path, upto=name)
        path, changed = authoring.refresh(sdir, work, pristine, patch=name)
        assert not changed and path.name == name
    work = _work(sdir, pristine, tmp_path)
    assert authoring.refresh(sdir, work, pristine)[1] is False
    assert {p.name: p.read_bytes() for p in sdir.iterdir()} == before


def test_refresh_top_keeps_header_and_diffs_against_the_patches_below(series, tmp_path):
    sdir, pristine = series
    work = _work(sdir, pristine, tmp_path)
    _edit(work, PATH, "line 5\n", "line 5\nbelow()\n")
    authoring.new_patch(sdir, "0001.patch", work, pristine, header="Below.\n")
    work = _work(sdir, pristine, tmp_path)
    _edit(work, PATH, "line 20\n", "line 20\ntop()\n")
    authoring.new_patch(sdir, "0002.patch", work, pristine, header="Top: keep me.\n\n")
    work = _work(sdir, pristine, tmp_path)
    _edit(work, PATH, "top()\n", "top(changed=True)\n")
    path, changed = authoring.refresh(sdir, work, pristine)
    text = path.read_text()
    assert changed and text.startswith("Top: keep me.\n\ndiff --git ")
    assert "+top(changed=True)\n" in text and "below()" not in text
    assert "@@ -19,6 +19,7 @@" in text  # pristine line 20 follows patch 1's insertion


def test_refresh_of_a_lower_patch_checks_the_patches_above(series, tmp_path):
    sdir, pristine = series
    for i, anchor in enumerate(("line 5\n", "line 9\n"), 1):
        work = _work(sdir, pristine, tmp_path)
        _edit(work, PATH, anchor, anchor + f"t{i}()\n")
        authoring.new_patch(sdir, f"000{i}.patch", work, pristine)
    # An edit far from patch 2 keeps it applicable ...
    work = _work(sdir, pristine, tmp_path, upto="0001.patch")
    _edit(work, PATH, "t1()\n", "t1(x=1)\n")
    assert authoring.refresh(sdir, work, pristine, patch="0001.patch")[1] is True
    # ... one that adds lines above patch 2 moves its hunk: refused, nothing written.
    before = (sdir / "0001.patch").read_bytes()
    work = _work(sdir, pristine, tmp_path, upto="0001.patch")
    _edit(work, PATH, "line 2\n", "line 2\nmore()\n")
    with pytest.raises(authoring.AuthoringError, match=r"would break 0002\.patch"):
        authoring.refresh(sdir, work, pristine, patch="0001.patch")
    assert (sdir / "0001.patch").read_bytes() == before


def test_new_patch_refusals(series, tmp_path):
    sdir, pristine = series
    work = _work(sdir, pristine, tmp_path)
    with pytest.raises(authoring.AuthoringError, match="no change"):
        authoring.new_patch(sdir, "0001.patch", work, pristine)
    with pytest.raises(InvalidInput):
        authoring.new_patch(sdir, "../evil.patch", work, pristine)
    with pytest.raises(authoring.AuthoringError, match=r"new file python/pkg/none\.py"):
        authoring.new_patch(sdir, "0001.patch", work, pristine, new_files=["python/pkg/none.py"])
    _edit(work, PATH, "line 1\n", "line 1\nx()\n")
    authoring.new_patch(sdir, "0001.patch", work, pristine)
    with pytest.raises(authoring.AuthoringError, match="already exists"):
        authoring.new_patch(sdir, "0001.patch", work, pristine)
    (pristine / PATH).write_text(BASE + "drift\n")
    with pytest.raises(authoring.AuthoringError, match="not the pinned text"):
        authoring.new_patch(sdir, "0002.patch", work, pristine)


def test_installed_layout_trees_and_series_comments(series, tmp_path):
    sdir, _pristine = series
    (sdir / "series").write_text("# my timers\n\n")
    site = tmp_path / "site"
    (site / "pkg").mkdir(parents=True)
    (site / "pkg/mod.py").write_text(BASE)
    work = _work(sdir, site, tmp_path, layout="installed")
    assert (work / "pkg/mod.py").is_file()
    _edit(work, "pkg/mod.py", "line 3\n", "line 3\nx()\n")
    patch = authoring.new_patch(sdir, "0001.patch", work, site)
    assert f"+++ b/{PATH}\n" in patch.read_text()
    assert (sdir / "series").read_text() == "# my timers\n\n0001.patch\n"


def test_regenerate_new_file_patch_keeps_header(tmp_path):
    sdir = tmp_path / "s"
    sdir.mkdir()
    src = tmp_path / "rt.py"
    src.write_text("def begin(name):\n    pass\n")
    (sdir / "0001.patch").write_text("Adds the runtime.\n\n")
    text, changed = authoring.regenerate_new_file_patch(sdir, "0001.patch", "pkg/rt.py", src)
    assert changed and text.startswith("Adds the runtime.\n\ndiff --git a/pkg/rt.py b/pkg/rt.py\n")
    assert (sdir / "0001.patch").read_text() == text
    assert authoring.regenerate_new_file_patch(sdir, "0001.patch", "pkg/rt.py", src)[1] is False
    src.write_text("def begin(name):\n    return None\n")
    _, changed = authoring.regenerate_new_file_patch(sdir, "0001.patch", "pkg/rt.py", src, write=False)
    assert changed and "return None" not in (sdir / "0001.patch").read_text()


def test_regenerate_runtime_patches_finds_the_runtime_patch(tmp_path):
    sdir = tmp_path / "s"
    sdir.mkdir()
    src = tmp_path / "phase_timer.py"
    src.write_text("def begin(name):\n    pass\n")
    (sdir / "0001-rt.patch").write_text(
        "Adds the runtime.\n\n" + authoring.new_file_patch("pkg/phase_timer.py", src.read_text())
    )
    (sdir / "series").write_text("0001-rt.patch\n")
    assert authoring.regenerate_runtime_patches(sdir, src, write=False) == [("0001-rt.patch", False)]
    src.write_text("def begin(name, **attrs):\n    pass\n")
    assert authoring.regenerate_runtime_patches(sdir, src, write=False) == [("0001-rt.patch", True)]
    assert authoring.regenerate_runtime_patches(sdir, src) == [("0001-rt.patch", True)]
    assert "+def begin(name, **attrs):" in (sdir / "0001-rt.patch").read_text()
    (sdir / "series").write_text("")
    with pytest.raises(InvalidInput, match="no patch creates"):
        authoring.regenerate_runtime_patches(sdir, src)
