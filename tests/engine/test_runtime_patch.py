"""The runtime patch of every series: stored once (patchkit/timing/phase_timer.py), rendered on read.

A series folder in the checkout lists ``0001-phase-timer-runtime.patch`` in ``series`` and holds
``0001-phase-timer-runtime.patch.runtime`` (the path the patch creates) instead of the patch.
These tests hold what users get to the runtime file itself: the loader's bytes, the digest, an
apply on an empty tree, ``patch.export`` and the errors a broken folder gets.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from patchkit import ops
from patchkit.author import authoring
from patchkit.engine import runtime_patch
from patchkit.engine.diffparse import parse_patch
from patchkit.engine.series import load_series, read_series
from patchkit.errors import InvalidInput
from patchkit.locations import series_root, shipped_names
from patchkit.pin import read_pin
from patchkit.timing import RUNTIME_PATH
from support.cli import invoke
from support.engine import make_series

RUNTIME = runtime_patch.RUNTIME_PATCH
MARKER = RUNTIME + runtime_patch.MARKER_SUFFIX
SHIPPED = shipped_names()


def added_bytes(data: bytes) -> tuple[str, bytes]:
    """(path, the file's bytes) of a patch that creates one file, read back from its '+' lines."""
    patch = parse_patch(RUNTIME, data)
    assert len(patch.files) == 1
    fd = patch.files[0]
    assert fd.kind == "create"
    return fd.path, b"".join(ln.text + b"\n" for h in fd.hunks for ln in h.lines if ln.tag == "+")


def test_every_shipped_series_reads_its_runtime_patch_as_the_rendering_of_the_one_runtime():
    assert len(SHIPPED) >= 33
    for name in SHIPPED:
        folder = series_root() / name
        assert not (folder / RUNTIME).exists(), f"{name}: the runtime patch is rendered, not stored"
        path = runtime_patch.read_marker(str(folder / MARKER))
        files = read_series(str(folder))
        assert files.patches[0][0] == RUNTIME, name
        data = files.patches[0][1]
        assert data == runtime_patch.render(path, read_pin(folder / "pin.toml").package_prefix), name
        created, body = added_bytes(data)
        assert created == path and body == RUNTIME_PATH.read_bytes(), name
        header = authoring.split_header(data.decode())[0]
        assert header.startswith("Adds the patchkit phase timer runtime as ") and "gen-runtime" in header


def test_the_runtime_patch_follows_the_runtime_file(tmp_path, monkeypatch):
    """An edit of patchkit/timing/phase_timer.py is the one edit: every series reads it."""
    source = tmp_path / "phase_timer.py"
    source.write_bytes(RUNTIME_PATH.read_bytes() + b"# one more line\n")
    monkeypatch.setattr(runtime_patch, "RUNTIME_PATH", source)
    for name in ("sglang-v0.5.9", "transformers-v5.17.0"):
        data = read_series(str(series_root() / name)).patches[0][1]
        assert added_bytes(data)[1] == source.read_bytes()


def test_applying_the_runtime_patch_to_an_empty_tree_writes_the_runtime_byte_for_byte(tmp_path):
    """Through the engine (the one sh program, then revert) and through git apply."""
    for name in ("sglang-v0.5.9", "transformers-v5.17.0"):
        data = read_series(str(series_root() / name)).patches[0][1]
        path = runtime_patch.read_marker(str(series_root() / name / MARKER))
        # git apply, an independent applier, in an empty folder outside any repository
        empty = tmp_path / f"git-{name}"
        empty.mkdir()
        env = dict(os.environ, GIT_CEILING_DIRECTORIES=str(tmp_path))
        proc = subprocess.run(["git", "apply", "-"], cwd=empty, input=data, capture_output=True, env=env)
        assert proc.returncode == 0, proc.stderr
        assert (empty / path).read_bytes() == RUNTIME_PATH.read_bytes()
        assert [str(p.relative_to(empty)) for p in empty.rglob("*") if p.is_file()] == [path]
    # the engine: a series of the runtime patch alone (its marker), nothing pinned, an empty target
    sdir = make_series(tmp_path / "series", {}, [])
    (sdir / "series").write_text(RUNTIME + "\n")
    (sdir / MARKER).write_text(runtime_patch.marker_text("pkg/phase_timer.py"))
    target = tmp_path / "target"
    target.mkdir()
    result = ops.apply(str(sdir), [str(target)])
    assert result.exit_code == 0, result.to_json()
    assert (target / "pkg/phase_timer.py").read_bytes() == RUNTIME_PATH.read_bytes()
    assert ops.revert(str(sdir), [str(target)]).exit_code == 0
    assert not (target / "pkg").exists()


def test_digest_and_bytes_equal_for_the_marker_and_the_exported_file(tmp_path):
    for name in SHIPPED:
        dest, count = authoring.export_series(series_root() / name, tmp_path)
        assert dest == tmp_path / name
        assert not (dest / MARKER).exists() and (dest / RUNTIME).is_file()
        checkout = series_root() / name
        # every file but the marker and the authoring notes (README.md, REBASE.md: the checkout's)
        kept = sorted(p.name for p in checkout.iterdir() if p.name != MARKER and p.suffix != ".md")
        assert not list(dest.glob("*.md"))
        assert sorted(p.name for p in dest.iterdir()) == sorted([*kept, RUNTIME]) and count == len(kept) + 1
        for other in kept:
            assert (dest / other).read_bytes() == (checkout / other).read_bytes(), (name, other)
        ours, theirs = read_series(str(checkout)), read_series(str(dest))
        assert ours.digest == theirs.digest and ours.patches == theirs.patches, name
        assert (dest / RUNTIME).read_bytes() == dict(ours.patches)[RUNTIME]
        # patch.gen-runtime finds nothing to do, in the checkout (a marker) or the export (a file):
        # the one place the runtime copies of every series are checked against the runtime
        path = runtime_patch.read_marker(str(checkout / MARKER))
        assert authoring.regenerate_runtime_patches(checkout, write=False) == [(RUNTIME, False)], name
        assert authoring.regenerate_runtime_patches(dest, write=False) == [(RUNTIME, False)], name
        assert not authoring.regenerate_new_file_patch(dest, RUNTIME, path, RUNTIME_PATH, write=False)[1]
        assert authoring.created_paths((dest / RUNTIME).read_text()) == [path], name
    assert (
        load_series(str(tmp_path / "sglang-v0.5.9")).digest
        == load_series(str(series_root() / "sglang-v0.5.9")).digest
    )


def test_a_copy_beside_the_marker_is_read_only_when_it_is_the_rendering(tmp_path):
    folder = tmp_path / "sglang-v0.5.9"
    shutil.copytree(series_root() / "sglang-v0.5.9", folder)
    rendered = read_series(str(folder)).patches[0][1]
    (folder / RUNTIME).write_bytes(rendered)
    assert read_series(str(folder)).patches[0][1] == rendered
    (folder / RUNTIME).write_bytes(rendered.replace(b"+", b"+ ", 1))
    with pytest.raises(InvalidInput, match="stale copy"):
        read_series(str(folder))
    assert authoring.regenerate_runtime_patches(folder, write=False) == [(RUNTIME, True)]
    assert authoring.regenerate_runtime_patches(folder) == [(RUNTIME, True)]  # rewrites the copy
    assert (folder / RUNTIME).read_bytes() == rendered


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        ("a/phase_timer.py\nb/phase_timer.py\n", "exactly one path"),
        ("# only a comment\n", "exactly one path"),
        ("python/sglang/timer.py\n", "creates a phase_timer.py"),
        ("../phase_timer.py\n", r"'\.\.'"),
        ("/abs/phase_timer.py\n", "absolute"),
    ],
)
def test_a_bad_marker_is_refused(tmp_path, marker, message):
    folder = tmp_path / "s"
    shutil.copytree(series_root() / "sglang-v0.5.9", folder)
    (folder / MARKER).write_text(marker)
    with pytest.raises(InvalidInput, match=message):
        read_series(str(folder))


def test_a_listed_patch_with_neither_file_nor_marker_is_refused(tmp_path):
    folder = tmp_path / "s"
    shutil.copytree(series_root() / "sglang-v0.5.9", folder)
    (folder / MARKER).unlink()
    with pytest.raises(InvalidInput, match=f"lists {RUNTIME}, which does not exist"):
        read_series(str(folder))


def test_refresh_leaves_the_rendered_patch_alone_and_refuses_to_change_it(tmp_path):
    sdir = make_series(tmp_path / "series", {"pkg/mod.py": b"x = 1\n"}, [])
    (sdir / "series").write_text(RUNTIME + "\n")
    (sdir / MARKER).write_text(runtime_patch.marker_text("pkg/phase_timer.py"))
    pristine = tmp_path / "pristine"
    (pristine / "pkg").mkdir(parents=True)
    (pristine / "pkg/mod.py").write_bytes(b"x = 1\n")
    work = authoring.prepare_edit_tree(sdir, pristine, tmp_path / "work")
    assert (work / "pkg/phase_timer.py").read_bytes() == RUNTIME_PATH.read_bytes()
    assert authoring.refresh(sdir, work, pristine, patch=RUNTIME)[1] is False
    (work / "pkg/phase_timer.py").write_text("changed = True\n")
    with pytest.raises(authoring.AuthoringError, match="rendered from patchkit/timing"):
        authoring.refresh(sdir, work, pristine, patch=RUNTIME)
    assert sorted(p.name for p in sdir.iterdir()) == [MARKER, "pin.toml", "series"]
    # a new patch may not take a marker's name, nor the name of the patch a marker stands for
    (work / "pkg/phase_timer.py").write_bytes(RUNTIME_PATH.read_bytes())
    (work / "pkg/mod.py").write_text("x = 2\n")
    with pytest.raises(InvalidInput, match="plain file name"):
        authoring.new_patch(sdir, "0002-x.patch.runtime", work, pristine)
    (sdir / "series").write_text("")  # unlisted: still its marker's
    with pytest.raises(authoring.AuthoringError, match="already exists"):
        authoring.new_patch(sdir, RUNTIME, work, pristine)


def test_export_task(tmp_path):
    proc = invoke("patch.export", "--all", "--out", str(tmp_path / "all"))
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (tmp_path / "all").iterdir()) == SHIPPED
    assert proc.stdout.count("wrote ") == len(SHIPPED)
    for name in SHIPPED:
        assert (tmp_path / "all" / name / RUNTIME).read_bytes() == read_series(
            str(series_root() / name)
        ).patches[0][1]
    proc = invoke("patch.export", "--series", "sglang-v0.5.14", "--out", str(tmp_path / "one"))
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (tmp_path / "one").iterdir()) == ["sglang-v0.5.14"]
    assert (
        read_series(str(tmp_path / "one" / "sglang-v0.5.14")).digest
        == read_series(str(series_root() / "sglang-v0.5.14")).digest
    )
    again = invoke("patch.export", "--series", "sglang-v0.5.14", "--out", str(tmp_path / "one"))
    assert again.returncode == 2 and "already exists" in again.stderr
    assert invoke("patch.export", "--all", "--series", "sglang-v0.5.14", "--out", "x").returncode == 2
    assert invoke("patch.export", "--series", "sglang-v0.5.14").returncode == 2
