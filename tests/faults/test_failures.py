"""Every failure says what happened, with the contract's exit code, and leaves the
target byte-identical. Run through the real CLI (`invoke patch.*`) on small real trees."""

from __future__ import annotations

import json
import shlex
import time

import pytest

from support.failures import GOOD, invoke, json_doc, one_line, small_series, small_target, tree_digest


@pytest.fixture
def tree(tmp_path):
    return small_target(tmp_path / "target")


@pytest.fixture
def series(tmp_path):
    return small_series(tmp_path / "series")


# -- 1. a wrapper that fails with exit 1 (no such container, pod not found) shows its stderr ----------


@pytest.mark.parametrize("rc", [1, 2, 125])
def test_exec_prefix_failure_shows_its_stderr(tree, series, rc):
    before = tree_digest(tree)
    prefix = f"bash -c {shlex.quote(f'echo Error: no such container: c9 >&2; exit {rc}')}"
    proc = invoke("patch.apply", "--series", str(series), "--target", str(tree), "--exec", prefix, "--json")
    assert proc.returncode == 1, proc.stderr
    host = json.loads(proc.stdout)["hosts"][0]
    assert any("no such container: c9" in m for m in host["messages"]), host
    text = invoke("patch.verify", "--series", str(series), "--target", str(tree), "--exec", prefix)
    assert text.returncode == 1
    assert "no such container" in text.stdout  # the table's error column
    assert tree_digest(tree) == before


# -- 2. configuration keys: the documented one works, unknown ones are refused --------------------


def test_unknown_patchkit_key_is_refused_naming_key_and_file(tree, series, tmp_path):
    cfg = tmp_path / "site.yaml"
    cfg.write_text("patchkit:\n  jobz: 4\n")
    before = tree_digest(tree)
    proc = invoke("-f", str(cfg), "patch.apply", "--series", str(series), "--target", str(tree))
    assert proc.returncode == 2
    line = one_line(proc.stderr)
    assert "patchkit.jobz" in line and str(cfg) in line
    cfg.write_text("patchkit:\n  profile:\n    sise: cpu\n")
    proc = invoke("-f", str(cfg), "patch.status", "--series", str(series), "--target", str(tree))
    assert proc.returncode == 2 and "patchkit.profile.sise" in one_line(proc.stderr)
    assert tree_digest(tree) == before


def test_old_engine_series_key_is_read_with_a_note(tree, series, tmp_path):
    cfg = tmp_path / "site.yaml"
    cfg.write_text(f"patchkit:\n  engine:\n    series: {series}\n  targets: [{tree}]\n")
    proc = invoke("-f", str(cfg), "patch.verify", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json_doc(proc.stdout)["series"] == "series"  # the configured one, not the default
    assert "patchkit.engine.series is the old name of patchkit.series" in one_line(proc.stderr)
    cfg.write_text("patchkit:\n  engine:\n    seriez: x\n")
    proc = invoke("-f", str(cfg), "patch.verify", "--target", str(tree))
    assert proc.returncode == 2 and "patchkit.engine.seriez" in one_line(proc.stderr)


def test_help_names_the_key_that_exists():
    proc = invoke("--help", "patch.apply")
    assert "patchkit.series" in proc.stdout and "patchkit.engine.series" not in proc.stdout


# -- 3. --json: stdout is always one JSON document -------------------------------------------------

JSON_KEYS = {"schema", "op", "series", "digest", "exit_code", "error", "hosts", "proven"}


@pytest.mark.parametrize("case", ["ok", "invalid-option", "invalid-series", "refused", "auto"])
def test_json_is_always_one_document(tree, series, tmp_path, case):
    args = ["--series", str(series), "--target", str(tree)]
    expect = 0
    if case == "invalid-option":
        args += ["--jobs", "abc"]
        expect = 2
    elif case == "invalid-series":
        (series / "0001.patch").write_bytes(GOOD.replace(b"@@ -4,3 +4,4 @@", b"@@ -4,5 +4,6 @@"))
        expect = 2
    elif case == "refused":
        (tree / "pkg" / "m.py").write_bytes(b"changed\n")
        expect = 1
    elif case == "auto":
        args = ["--series", "auto", "--target", str(tree)]
        expect = 1
    before = tree_digest(tree)
    proc = invoke("patch.apply", "--json", *args)
    assert proc.returncode == expect, proc.stderr
    doc = json_doc(proc.stdout)
    assert set(doc) == JSON_KEYS
    assert doc["schema"] == "patchkit.result/2" and doc["exit_code"] == expect
    assert (doc["error"] is None) == (expect == 0)
    if expect:
        assert doc["error"] and "\n" not in doc["error"]
    if case != "ok":
        assert tree_digest(tree) == before


# -- 2b/7c. the default series on another release: the useful fact first, one line per hunk -------


@pytest.mark.wheels  # sglang_installed reads the 0.5.10 wheel
def test_wrong_release_says_installed_and_pinned_first(tmp_path):
    from support.upstream import sglang_installed

    site = sglang_installed("0.5.10", tmp_path / "site")
    before = tree_digest(site)
    proc = invoke("patch.apply", "--series", "patches/sglang-v0.5.9", "--target", str(site))
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    detail = lines[lines.index(f"{site}:") + 1 :]
    assert detail[0].startswith("  installed sglang 0.5.10, pinned 0.5.9: try --series auto")
    assert max(len(ln) for ln in lines) < 400  # no 3 KB line
    files: list[list[str]] = []
    for ln in detail:
        if ln.startswith("  sglang/"):
            files.append([])
        elif ln.startswith("    ") and "@@" in ln:
            files[-1].append(ln)
    assert len(files) == 2 and all(len(f) >= 2 for f in files)
    for hunks in files:  # ascending, as a reader goes down the file
        changed = [int(ln.split(": line ")[1].split(":")[0]) for ln in hunks if ": line " in ln]
        assert len(changed) >= 2 and changed == sorted(changed), hunks
    assert detail[-1] == "  wrote nothing"
    assert tree_digest(site) == before


# -- 6. read-only targets: verify is a gate that fails when apply would; revert of nothing is ok ---


def _read_only(tree, *invoke_args):
    """Run the CLI with `tree` bind-mounted read-only in a private mount namespace (root ignores
    permission bits, so a real read-only mount is the only honest read-only target here)."""
    import subprocess
    import sys

    from support.failures import REPO

    probe = subprocess.run(["unshare", "-m", "--", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("cannot make a read-only mount here")
    script = (
        f"mount --bind {tree} {tree} && mount -o remount,ro,bind {tree} && "
        f"exec {sys.executable} -m invoke {' '.join(shlex.quote(a) for a in invoke_args)}"
    )
    return subprocess.run(
        ["unshare", "-m", "--", "sh", "-c", script],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": str(tree.parent)},
    )


def test_read_only_verify_fails_and_revert_of_nothing_succeeds(tree, series):
    before = tree_digest(tree)
    verify = _read_only(tree, "patch.verify", "--series", str(series), "--target", str(tree))
    assert verify.returncode == 1, verify.stdout + verify.stderr
    assert "apply would fail" in verify.stdout and "not writable" in verify.stdout
    revert = _read_only(tree, "patch.revert", "--series", str(series), "--target", str(tree))
    assert revert.returncode == 0, revert.stdout + revert.stderr
    assert "nothing to revert" in revert.stdout
    assert tree_digest(tree) == before


# -- 7. messages that say what happened ------------------------------------------------------------


def test_concurrent_applies_never_blame_the_file_system(tmp_path, series):
    from concurrent.futures import ThreadPoolExecutor

    from patchkit import ops

    for n in range(8):
        root = small_target(tmp_path / f"t{n}")
        with ThreadPoolExecutor(2) as pool:
            results = list(pool.map(lambda spec: ops.apply(str(series), [spec]), [str(root)] * 2))
        messages = [m for r in results for h in r.hosts for m in h.messages]
        assert not any("cannot create" in m for m in messages), messages
        assert any(r.exit_code == 0 for r in results)
        for r in results:  # the other one: done already, or told who holds the lock
            assert r.exit_code == 0 or any("locked by" in m for m in r.hosts[0].messages), messages


def test_a_fleet_listing_one_target_twice_is_refused(tree, series):
    before = tree_digest(tree)
    proc = invoke("patch.apply", "--series", str(series), "--target", str(tree), "--target", str(tree) + "/")
    assert proc.returncode == 2
    assert "listed twice" in one_line(proc.stderr)
    assert tree_digest(tree) == before


def test_file_edited_after_apply_is_called_that(tree, series):
    assert invoke("patch.apply", "--series", str(series), "--target", str(tree)).returncode == 0
    (tree / "pkg" / "m.py").write_bytes(b"edited by hand\n")
    proc = invoke("patch.apply", "--series", str(series), "--target", str(tree))
    assert proc.returncode == 1
    assert "modified after apply" in proc.stdout and "interrupted" not in proc.stdout


TWO_HUNKS = b"".join(b"line %d\n" % i for i in range(1, 41))
TWO_HUNK_PATCH = (
    b"diff --git a/pkg/m.py b/pkg/m.py\n--- a/pkg/m.py\n+++ b/pkg/m.py\n"
    b"@@ -4,3 +4,4 @@\n line 4\n line 5\n+inserted\n line 6\n"
    b"@@ -30,3 +31,4 @@\n line 30\n+again\n line 31\n line 32\n"
)


@pytest.mark.parametrize(
    "bad, blamed",
    [
        (
            TWO_HUNK_PATCH.replace(b"@@ -4,3 +4,4 @@", b"@@ -4,3 +4,6 @@"),
            "diff line 4: hunk header '@@ -4,3 +4,6 @@'",
        ),
        (
            TWO_HUNK_PATCH.replace(b"@@ -30,3 +31,4 @@", b"@@ -30,5 +31,6 @@"),
            "diff line 9: hunk header '@@ -30,5 +31,6 @@'",
        ),
        (TWO_HUNK_PATCH + b"Z" * 300, "diff line 14: 'ZZZ"),
        (TWO_HUNK_PATCH + b"\n\nnot a diff line\n" * 20, "diff line 16: 'not a diff line'"),
    ],
)
def test_bad_counts_and_junk_name_the_right_line(tmp_path, bad, blamed):
    from support.engine import make_series, write_tree

    root = tmp_path / "target"
    write_tree(root, {"pkg/m.py": TWO_HUNKS})
    series = make_series(tmp_path / "s", {"pkg/m.py": TWO_HUNKS}, [("0001.patch", bad)])
    before = tree_digest(root)
    proc = invoke("patch.apply", "--series", str(series), "--target", str(root))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert blamed in one_line(proc.stderr) and "0001.patch" in proc.stderr
    assert tree_digest(root) == before
    good = make_series(tmp_path / "g", {"pkg/m.py": TWO_HUNKS}, [("0001.patch", TWO_HUNK_PATCH)])
    assert invoke("patch.verify", "--series", str(good), "--target", str(root)).returncode == 0


# -- 4. revert takes away the bytecode the patched and created files produced ----------------------

PY_ORIG = b"".join(b"x%d = %d\n" % (i, i) for i in range(1, 21))
PY_PATCH = (
    b"diff --git a/pkg/m.py b/pkg/m.py\n--- a/pkg/m.py\n+++ b/pkg/m.py\n"
    b"@@ -4,3 +4,4 @@\n x4 = 4\n x5 = 5\n+from pkg import timer\n x6 = 6\n"
    b"diff --git a/pkg/timer.py b/pkg/timer.py\nnew file mode 100644\n--- /dev/null\n"
    b"+++ b/pkg/timer.py\n@@ -0,0 +1,1 @@\n+T = 1\n"
)


def _import_all(root):
    import subprocess
    import sys

    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root)}
    subprocess.run([sys.executable, "-c", "import pkg.m"], env=env, check=True, cwd=root)


def test_revert_removes_bytecode_and_status_reports_leftovers(tmp_path):
    import py_compile

    from support.engine import make_series, write_tree

    root = tmp_path / "target"
    write_tree(root, {"pkg/__init__.py": b"", "pkg/m.py": PY_ORIG})
    for name in ("__init__", "m"):  # the originals' bytecode, before apply
        py_compile.compile(str(root / f"pkg/{name}.py"))
    before = tree_digest(root)
    series = make_series(tmp_path / "s", {"pkg/m.py": PY_ORIG}, [("0001.patch", PY_PATCH)])
    assert invoke("patch.apply", "--series", str(series), "--target", str(root)).returncode == 0
    _import_all(root)  # the patched run compiles both files
    pycache = sorted(p.name for p in (root / "pkg/__pycache__").iterdir())
    assert any(n.startswith("timer.") for n in pycache), pycache
    revert = invoke("patch.revert", "--series", str(series), "--target", str(root))
    assert revert.returncode == 0, revert.stdout
    assert "removed the bytecode" in revert.stdout
    assert tree_digest(root) == before  # the original's .pyc is back, byte for byte

    # a leftover (an older patchkit's revert, or a hand-made copy): status says so
    (root / "pkg/__pycache__/timer.cpython-311.pyc").write_bytes(b"stale")
    status = invoke("patch.status", "--series", str(series), "--target", str(root))
    assert status.returncode == 0
    assert "left behind: pkg/__pycache__/timer.cpython-311.pyc" in status.stdout
    assert "wrote nothing" in status.stdout


def test_status_mentions_the_trash_a_forced_revert_left(tree, series):
    assert invoke("patch.apply", "--series", str(series), "--target", str(tree)).returncode == 0
    (tree / "pkg" / "m.py").write_bytes(b"edited\n")
    forced = invoke("patch.revert", "--force", "--series", str(series), "--target", str(tree))
    assert forced.returncode == 0 and "modified file kept as .patchkit/trash" in forced.stdout
    status = invoke("patch.status", "--series", str(series), "--target", str(tree))
    assert "left behind: .patchkit/trash" in status.stdout


# -- 9. small truths -------------------------------------------------------------------------------


def test_rebased_headers_name_the_new_release():
    from patchkit.author.rebase import _renamed_release
    from patchkit.author.rebase_result import Source
    from patchkit.engine.series import load_series
    from support.failures import REPO

    pin = load_series(str(REPO / "patches/sglang-v0.5.9")).pin
    raw = (REPO / "patches/sglang-v0.5.9/0008-v2-cycle.patch").read_bytes()
    assert b"for sglang 0.5.9 " in raw
    new = Source("sglang 0.5.10", "", "0.5.10", None, {})
    out = _renamed_release(raw, pin, new)
    head, _, body = out.partition(b"diff --git ")
    assert b"for sglang 0.5.10 " in head and b"sglang 0.5.9 " not in head
    assert body == raw.partition(b"diff --git ")[2]  # the diff itself is untouched
    assert _renamed_release(raw, pin, Source("x", "", "0.5.9", None, {})) == raw


def test_series_auto_over_ssh_logs_in_once_without_a_persisting_master(sshd, tmp_path):
    from support.upstream import sglang_installed

    site = sglang_installed("0.5.9", tmp_path / "site")
    before = sshd.accepted()
    proc = invoke(
        "patch.verify",
        "--series",
        "auto",
        "--target",
        sshd.url(str(site)),
        "--ssh-config",
        str(sshd.client_config),
        "--ssh-persist",
        "0",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "--series auto: chose sglang-v0.5.9" in proc.stderr
    sshd.wait_log(lambda s: s.accepted() > before)
    time.sleep(0.5)  # a second login would be logged by now
    assert sshd.accepted() - before == 1


def test_show_script_with_json_is_refused_as_one_document(tree, series):
    proc = invoke("patch.apply", "--series", str(series), "--target", str(tree), "--show-script", "--json")
    assert proc.returncode == 2 and "--show-script" in one_line(proc.stderr)
    assert json_doc(proc.stdout)["exit_code"] == 2


@pytest.mark.parametrize("task", ["patch.check", "patch.verify", "patch.status"])
def test_every_run_says_what_it_wrote(tree, series, task):
    proc = invoke(task, "--series", str(series), "--target", str(tree))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "  wrote nothing" in proc.stdout.splitlines()
