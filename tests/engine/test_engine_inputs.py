"""Bad input -> exit 2 with a message that says where; drift -> exit 1 naming the hunk; the target
is left byte-identical in every case. Exercised through the real CLI (`invoke patch.*`)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.cli import invoke
from support.engine import make_series, read_tree, write_tree

REPO = Path(__file__).resolve().parents[2]
ORIG = b"".join(b"line %d\n" % i for i in range(1, 21))
GOOD = (
    b"diff --git a/pkg/m.py b/pkg/m.py\n--- a/pkg/m.py\n+++ b/pkg/m.py\n"
    b"@@ -4,3 +4,4 @@\n line 4\n line 5\n+inserted\n line 6\n"
)


@pytest.fixture
def target(tmp_path):
    root = tmp_path / "target"
    write_tree(root, {"pkg/m.py": ORIG, "pkg/other.py": b"x\n"})
    return root


def snapshot(root: Path) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def series_with(tmp_path, patch: bytes, pinned=None, name="s") -> Path:
    return make_series(
        tmp_path / name, pinned if pinned is not None else {"pkg/m.py": ORIG}, [("0001.patch", patch)]
    )


BAD_PATCHES = {
    "hunk-too-short": (GOOD.replace(b"@@ -4,3 +4,4 @@", b"@@ -4,5 +4,6 @@"), "0001.patch"),
    "hunk-too-long": (GOOD.replace(b"@@ -4,3 +4,4 @@", b"@@ -4,2 +4,3 @@"), "0001.patch"),
    "bad-hunk-header": (GOOD.replace(b"@@ -4,3 +4,4 @@", b"@@ -4,3 +4 4 @@"), "line"),
    "garbage-in-hunk": (GOOD.replace(b" line 5\n", b"?line 5\n"), "0001.patch"),
    "no-diff": (b"just some text\n", "no file diffs"),
    "absolute-path": (
        GOOD.replace(b"a/pkg/m.py", b"a//etc/passwd").replace(b"b/pkg/m.py", b"b//etc/passwd"),
        "unsafe path",
    ),
    "dotdot": (GOOD.replace(b"/pkg/m.py", b"/pkg/../../m.py"), "'..'"),
    "into-git": (GOOD.replace(b"/pkg/m.py", b"/.git/config"), ".git"),
    "no-prefix": (
        GOOD.replace(b"--- a/pkg/m.py", b"--- pkg/m.py")
        .replace(b"+++ b/pkg/m.py", b"+++ pkg/m.py")
        .replace(b"diff --git a/pkg/m.py b/pkg/m.py\n", b""),
        "prefix",
    ),
    "binary": (
        b"diff --git a/pkg/m.py b/pkg/m.py\nindex 1..2 100644\nBinary files a/pkg/m.py and b/pkg/m.py differ\n",
        "not supported",
    ),
    "git-binary": (
        b"diff --git a/pkg/m.py b/pkg/m.py\nindex 1..2 100644\nGIT binary patch\nliteral 0\nHcmV?d00001\n\n",
        "not supported",
    ),
    "rename": (
        b"diff --git a/pkg/m.py b/pkg/n.py\nsimilarity index 100%\nrename from pkg/m.py\nrename to pkg/n.py\n",
        "not supported",
    ),
    "copy": (
        b"diff --git a/pkg/m.py b/pkg/n.py\nsimilarity index 100%\ncopy from pkg/m.py\ncopy to pkg/n.py\n",
        "not supported",
    ),
    "symlink": (
        b"diff --git a/pkg/l b/pkg/l\nnew file mode 120000\nindex 0000000..1111111\n--- /dev/null\n"
        b"+++ b/pkg/l\n@@ -0,0 +1 @@\n+target\n\\ No newline at end of file\n",
        "not supported",
    ),
    "mode-only": (b"diff --git a/pkg/m.py b/pkg/m.py\nold mode 100644\nnew mode 100755\n", "not supported"),
    "overlap": (GOOD + b"@@ -5,2 +6,3 @@\n line 5\n+again\n line 6\n", "overlaps"),
    "descending": (
        b"diff --git a/pkg/m.py b/pkg/m.py\n--- a/pkg/m.py\n+++ b/pkg/m.py\n"
        b"@@ -10,1 +10,2 @@\n line 10\n+x\n@@ -2,1 +3,2 @@\n line 2\n+y\n",
        "overlaps or precedes",
    ),
    "unpinned": (GOOD.replace(b"pkg/m.py", b"pkg/other.py"), "not listed in pin.toml"),
    "create-pinned": (
        b"diff --git a/pkg/m.py b/pkg/m.py\nnew file mode 100644\n--- /dev/null\n+++ b/pkg/m.py\n@@ -0,0 +1 @@\n+x\n",
        "only absent files may be created",
    ),
    "beyond-eof": (GOOD.replace(b"@@ -4,3 +4,4 @@", b"@@ -19,3 +19,4 @@"), "past the end"),
    "nul": (GOOD.replace(b"inserted", b"ins\0erted"), "NUL"),
    "wrong-target-start": (GOOD.replace(b"@@ -4,3 +4,4 @@", b"@@ -4,3 +9,4 @@"), "target start"),
}


@pytest.mark.parametrize("case", sorted(BAD_PATCHES))
def test_bad_patch_is_exit_2_and_target_untouched(tmp_path, target, case):
    patch, needle = BAD_PATCHES[case]
    series = series_with(tmp_path, patch)
    before = snapshot(target)
    for task in ("patch.verify", "patch.apply"):
        proc = invoke(task, "--series", str(series), "--target", str(target))
        assert proc.returncode == 2, (case, task, proc.stdout, proc.stderr)
        assert needle in proc.stderr, (case, proc.stderr)
        assert "Traceback" not in proc.stderr
    assert snapshot(target) == before
    assert not (target / ".patchkit").exists()


BAD_PINS = {
    "not-toml": ("[upstream\nname=1", "not valid TOML"),
    "no-upstream": ('[[file]]\npath="pkg/m.py"\nsha256="%s"\nlines=20\n', "missing [upstream]"),
    "short-sha": (
        '[upstream]\nname="x"\n[[file]]\npath="pkg/m.py"\nsha256="abc"\nlines=20\n',
        "64 lowercase hex",
    ),
    "bad-lines": (
        '[upstream]\nname="x"\n[[file]]\npath="pkg/m.py"\nsha256="%s"\nlines="20"\n',
        "non-negative integer",
    ),
    "bad-commit": (
        '[upstream]\nname="x"\ncommit="HEAD"\n[[file]]\npath="pkg/m.py"\nsha256="%s"\nlines=20\n',
        "40 lowercase hex",
    ),
    "bad-path": ('[upstream]\nname="x"\n[[file]]\npath="../m.py"\nsha256="%s"\nlines=20\n', "unsafe path"),
    "twice": (
        '[upstream]\nname="x"\n[[file]]\npath="pkg/m.py"\nsha256="%s"\nlines=20\n'
        '[[file]]\npath="pkg/m.py"\nsha256="%s"\nlines=20\n',
        "pinned twice",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_PINS))
def test_bad_pin_is_exit_2(tmp_path, target, case):
    text, needle = BAD_PINS[case]
    sha = hashlib.sha256(ORIG).hexdigest()
    series = series_with(tmp_path, GOOD)
    (series / "pin.toml").write_text(text.replace("%s", sha))
    before = snapshot(target)
    proc = invoke("patch.apply", "--series", str(series), "--target", str(target))
    assert proc.returncode == 2, proc.stderr
    assert needle in proc.stderr
    assert snapshot(target) == before


def test_bad_series_files(tmp_path, target):
    series = series_with(tmp_path, GOOD)
    (series / "series").write_text("0001.patch\nmissing.patch\n")
    proc = invoke("patch.verify", "--series", str(series), "--target", str(target))
    assert proc.returncode == 2 and "missing.patch, which does not exist" in proc.stderr
    (series / "series").write_text("# nothing\n\n")
    proc = invoke("patch.verify", "--series", str(series), "--target", str(target))
    assert proc.returncode == 2 and "lists no patches" in proc.stderr
    proc = invoke("patch.verify", "--series", str(tmp_path / "nope"), "--target", str(target))
    assert proc.returncode == 2 and "no such directory" in proc.stderr


def test_bad_target_spec(tmp_path):
    series = series_with(tmp_path, GOOD)
    proc = invoke("patch.verify", "--series", str(series), "--target", "bad\nname")
    assert proc.returncode == 2, proc.stderr


def test_missing_root_is_refused(tmp_path):
    series = series_with(tmp_path, GOOD)
    proc = invoke("patch.apply", "--series", str(series), "--target", str(tmp_path / "absent"))
    assert proc.returncode == 1
    assert "does not exist" in proc.stdout


def test_drift_names_hunk_and_both_lines(tmp_path, target):
    series = series_with(tmp_path, GOOD)
    drifted = ORIG.replace(b"line 5\n", b"line five\n")
    (target / "pkg/m.py").write_bytes(drifted)
    before = snapshot(target)
    for task in ("patch.verify", "patch.apply"):
        proc = invoke(task, "--series", str(series), "--target", str(target))
        assert proc.returncode == 1, proc.stdout
        assert "@@ -4,3 +4,4 @@" in proc.stdout
        assert "expected 'line 5', found 'line five'" in proc.stdout
    assert snapshot(target) == before
    assert not (target / ".patchkit" / "manifest").exists()


def test_moved_lines_are_reported_as_moved(tmp_path, target):
    series = series_with(tmp_path, GOOD)
    (target / "pkg/m.py").write_bytes(b"new first\nnew second\n" + ORIG)
    proc = invoke("patch.verify", "--series", str(series), "--target", str(target), "--json")
    assert proc.returncode == 1
    assert "moved" in proc.stdout and "(+2 lines)" in proc.stdout


def test_dry_run_and_show_script_write_nothing(tmp_path, target):
    series = series_with(tmp_path, GOOD)
    before = snapshot(target)
    proc = invoke(
        "patch.apply", "--series", str(series), "--target", str(target), "--dry-run", "--show-script"
    )
    assert proc.returncode == 0, proc.stderr
    assert "5s/$/\\\ninserted/" in proc.stdout  # the exact sed edit is shown
    assert "pk_run_verify" in proc.stdout
    assert snapshot(target) == before and not (target / ".patchkit").exists()


def test_apply_is_idempotent_and_says_what_it_wrote(tmp_path, target):
    series = series_with(tmp_path, GOOD)
    proc = invoke("patch.apply", "--series", str(series), "--target", str(target))
    assert proc.returncode == 0 and "wrote: pkg/m.py" in proc.stdout
    proc = invoke("patch.apply", "--series", str(series), "--target", str(target))
    assert proc.returncode == 0 and "already applied" in proc.stdout and "wrote:" not in proc.stdout
    proc = invoke("patch.status", "--series", str(series), "--target", str(target), "--json")
    assert '"state": "applied"' in proc.stdout


def test_updated_series_is_not_applied_on_top_of_the_old(tmp_path, target):
    old = series_with(tmp_path, GOOD, name="old")
    new = series_with(tmp_path, GOOD.replace(b"+inserted", b"+inserted v2"), name="new")
    assert invoke("patch.apply", "--series", str(old), "--target", str(target)).returncode == 0
    patched = snapshot(target)
    proc = invoke("patch.apply", "--series", str(new), "--target", str(target))
    assert proc.returncode == 1 and "another version" in proc.stdout
    assert snapshot(target) == patched
    # revert works from the journal even when given the newer series
    assert invoke("patch.revert", "--series", str(new), "--target", str(target)).returncode == 0
    assert read_tree(target, ["pkg/m.py"])["pkg/m.py"] == ORIG
    assert invoke("patch.apply", "--series", str(new), "--target", str(target)).returncode == 0


def test_revert_refuses_modified_unless_forced(tmp_path, target):
    series = series_with(tmp_path, GOOD)
    assert invoke("patch.apply", "--series", str(series), "--target", str(target)).returncode == 0
    (target / "pkg/m.py").write_bytes(b"hand edit\n")
    proc = invoke("patch.status", "--series", str(series), "--target", str(target))
    assert "modified" in proc.stdout
    proc = invoke("patch.revert", "--series", str(series), "--target", str(target))
    assert proc.returncode == 1 and "modified after apply" in proc.stdout
    assert (target / "pkg/m.py").read_bytes() == b"hand edit\n"
    proc = invoke("patch.revert", "--series", str(series), "--target", str(target), "--force")
    assert proc.returncode == 0, proc.stdout
    assert (target / "pkg/m.py").read_bytes() == ORIG
    assert b"hand edit\n" in [p.read_bytes() for p in (target / ".patchkit/trash").rglob("*") if p.is_file()]


def test_lock_blocks_a_second_operation(tmp_path, target):
    """Locks of live owners and of owners patchkit cannot judge are refused, naming them; a dead
    owner's lock is taken over (tests/engine/test_engine_recovery.py). a dead
    owner on this host used to be refused as STALE until patch.unlock."""
    series = series_with(tmp_path, GOOD)
    state = target / ".patchkit"
    state.mkdir()
    # an older patchkit's lock directory, its owner alive (pid 1 always is)
    (state / "lock").mkdir()
    (state / "lock" / "owner").write_text(
        f"pid=1 host={os.uname().nodename} user=someone op=apply time=9999999999\n"
    )
    before = snapshot(target)
    proc = invoke("patch.apply", "--series", str(series), "--target", str(target))
    assert proc.returncode == 1 and "locked by pid=1" in proc.stdout and "alive" in proc.stdout
    assert snapshot(target) == before
    # a lock taken on another host: whether its owner lives is unknowable here
    (state / "lock" / "owner").unlink()
    (state / "lock").rmdir()
    (state / "lock").write_text(
        "pid=999999 host=elsewhere-gpu7 user=x op=revert time=1 start=5 boot=b ns=4026531836 machine=m\n"
    )
    before = snapshot(target)
    proc = invoke("patch.apply", "--series", str(series), "--target", str(target), "--json")
    assert proc.returncode == 1, proc.stdout
    host = json.loads(proc.stdout)["hosts"][0]
    assert host["state"] == "locked" and host["lock"]["state"] == "foreign"
    assert host["lock"]["owner"]["host"] == "elsewhere-gpu7" and host["lock"]["reason"] == "other-host"
    note = " ".join(host["messages"])
    assert "pid=999999 host=elsewhere-gpu7" in note and "op=revert" in note and "patch.unlock" in note
    assert snapshot(target) == before
    assert invoke("patch.unlock", "--series", str(series), "--target", str(target)).returncode == 0
    assert not state.exists()  # unlock leaves no empty state folder either
    assert invoke("patch.apply", "--series", str(series), "--target", str(target)).returncode == 0


def test_symlink_inside_root_is_refused(tmp_path, target):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "m.py").write_bytes(ORIG)
    (target / "pkg" / "m.py").unlink()
    (target / "pkg" / "m.py").symlink_to(outside / "m.py")
    series = series_with(tmp_path, GOOD)
    proc = invoke("patch.apply", "--series", str(series), "--target", str(target))
    assert proc.returncode == 1 and "symlink" in proc.stdout
    assert (outside / "m.py").read_bytes() == ORIG


def test_read_only_target_is_refused_cleanly(tmp_path, target):
    if os.geteuid() == 0:
        # root ignores permission bits; a read-only bind mount needs privileges we may lack
        ro = subprocess.run(["unshare", "-m", "--", "true"], capture_output=True)
        if ro.returncode != 0:
            pytest.skip("cannot make a read-only mount here")
        series = series_with(tmp_path, GOOD)
        script = (
            f"mount --bind {target} {target} && mount -o remount,ro,bind {target} && "
            f"{sys.executable} -m invoke patch.apply --series {series} --target {target}"
        )
        proc = subprocess.run(
            ["unshare", "-m", "--", "sh", "-c", script], cwd=REPO, capture_output=True, text=True
        )
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "read-only" in proc.stdout or "Read-only" in proc.stdout
    else:
        os.chmod(target, 0o555)
        series = series_with(tmp_path, GOOD)
        proc = invoke("patch.apply", "--series", str(series), "--target", str(target))
        os.chmod(target, 0o755)
        assert proc.returncode == 1
    assert (target / "pkg/m.py").read_bytes() == ORIG


def test_checkout_commit_is_checked(tmp_path, target):
    subprocess.run(["git", "init", "-q"], cwd=target, check=True)
    subprocess.run(["git", "add", "-A"], cwd=target, check=True)
    subprocess.run(["git", "commit", "-qm", "base"], cwd=target, check=True)
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=target, capture_output=True, text=True
    ).stdout.strip()
    series = series_with(tmp_path, GOOD)
    pin = (series / "pin.toml").read_text()
    (series / "pin.toml").write_text(
        pin.replace('name = "demo"\n', f'name = "demo"\ncommit = "{"0" * 40}"\n')
    )
    proc = invoke("patch.apply", "--series", str(series), "--target", str(target))
    assert proc.returncode == 1 and head in proc.stdout
    (series / "pin.toml").write_text(pin.replace('name = "demo"\n', f'name = "demo"\ncommit = "{head}"\n'))
    proc = invoke("patch.apply", "--series", str(series), "--target", str(target))
    assert proc.returncode == 0, proc.stdout
    status = subprocess.run(["git", "status", "--porcelain"], cwd=target, capture_output=True, text=True)
    assert ".patchkit" not in status.stdout  # excluded via .git/info/exclude
    assert status.stdout.strip() == "M pkg/m.py"


def test_disk_full_is_refused_and_leaves_nothing(tmp_path):
    """A tmpfs too small for the staged copy: exit 1, a clear message, the tree as it was."""
    probe = subprocess.run(["unshare", "-m", "--", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("cannot create a mount namespace here")
    big = b"".join(b"line %d %s\n" % (i, b"x" * 60) for i in range(1, 401))  # ~28 KB
    patch = (
        b"diff --git a/pkg/m.py b/pkg/m.py\n--- a/pkg/m.py\n+++ b/pkg/m.py\n"
        b"@@ -4,3 +4,4 @@\n"
        + b"".join(b" line %d %s\n" % (i, b"x" * 60) for i in (4, 5))
        + b"+inserted\n"
        + b" line 6 %s\n" % (b"x" * 60)
    )
    series = series_with(tmp_path, patch, pinned={"pkg/m.py": big})
    mnt = tmp_path / "small"
    mnt.mkdir()
    script = (
        f"mount -t tmpfs -o size=48k tmpfs {mnt} && mkdir -p {mnt}/pkg && "
        f"cp {tmp_path}/orig.py {mnt}/pkg/m.py && "
        f"{sys.executable} -m invoke patch.apply --series {series} --target {mnt}; rc=$?; "
        f"cmp {tmp_path}/orig.py {mnt}/pkg/m.py && echo SAME; "
        f"ls -A {mnt}/.patchkit 2>/dev/null | tr '\\n' ' '; echo; exit $rc"
    )
    (tmp_path / "orig.py").write_bytes(big)
    proc = subprocess.run(
        ["unshare", "-m", "--", "sh", "-c", script], cwd=REPO, capture_output=True, text=True
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "disk full" in out, out
    assert "SAME" in out, out
    assert "stage" not in out.splitlines()[-1] and "orig" not in out.splitlines()[-1], out


def test_relative_series_and_target_are_taken_from_where_invoke_runs(tmp_path, target):
    series = series_with(tmp_path, GOOD)
    proc = invoke(
        "-r",
        str(REPO),
        "patch.apply",
        "--series",
        series.name,
        "--target",
        target.name,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "wrote: pkg/m.py" in proc.stdout
    assert (target / "pkg/m.py").read_bytes() != ORIG


def test_verify_fails_when_apply_could_not_write(tmp_path):
    probe = subprocess.run(["unshare", "-m", "--", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("cannot create a mount namespace here")
    root = tmp_path / "target"
    write_tree(root, {"pkg/m.py": ORIG})
    series = series_with(tmp_path, GOOD)
    script = (
        f"mount --bind {root}/pkg {root}/pkg && mount -o remount,ro,bind {root}/pkg && "
        f"{sys.executable} -m invoke patch.verify --series {series} --target {root}"
    )
    proc = subprocess.run(
        ["unshare", "-m", "--", "sh", "-c", script], cwd=REPO, capture_output=True, text=True
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr  # a CI gate must not pass
    assert "apply would fail" in proc.stdout and "not writable" in proc.stdout
