"""The import-mode hook in real Python processes, on a small read-only package.

A series (made by real git) patches ``demopkg/mod.py`` and creates ``demopkg/phase_timer.py``;
the hook folder is written by patchkit.engine.importmode and given to ``python`` on its
PYTHONPATH. Patched: the patched code runs, tracebacks and inspect.getsource show the patched
lines, the created module imports, and the tree (read-only) is byte-identical, with no .pyc.
Refused (the process does not start, exit REFUSED_EXIT, one ``refused`` line): a pinned file
that does not match its pin, a hunk that does not apply, a pinned module imported before the
hook ran, a created module already in the tree; a pinned module found in another copy of the
package raises ImportRefused at its import.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from patchkit.engine.importmode import hook_data, import_env, write_hook
from patchkit.engine.series import load_series
from patchkit.errors import InvalidInput
from patchkit.timing.import_hook import HOOK_FILE, REFUSED_EXIT
from support.engine import git_diff, make_series
from support.importmode import MOD, TIMER, demo_series as _series, demo_tree as _tree, tree_hashes as _hashes


def _read_only(root: Path) -> None:
    for p in [root, *root.rglob("*")]:
        p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def _writable(root: Path) -> None:
    for p in [root, *root.rglob("*")]:
        p.chmod(p.stat().st_mode | stat.S_IWUSR)


def _python(hook, root: Path, code: str, *flags: str, bytecode: bool = True) -> subprocess.CompletedProcess:
    env = import_env(hook)
    env["PYTHONPATH"] += os.pathsep + str(root)
    if not bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE")  # Python's own .pyc for the other modules
    return subprocess.run(
        [sys.executable, *flags, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )


CHECK = """
import inspect, traceback
import demopkg.mod as m
from demopkg import phase_timer
try:
    m.f(1)
except ValueError:
    tb = traceback.format_exc()
print(repr(tb.splitlines()[-2].strip()))
print(phase_timer.MARKS, m.g(), m.__file__, phase_timer.__file__)
print('source:', '_pt.mark' in inspect.getsource(m.f))
"""


@pytest.fixture
def tree(tmp_path):
    root = _tree(tmp_path)
    yield root
    _writable(root)


def test_patched_in_memory_tree_untouched(tmp_path, tree):
    hook = write_hook(str(_series(tmp_path)), str(tree), tmp_path / "hook")
    _read_only(tree)
    before = _hashes(tree)
    proc = _python(hook, tree, CHECK)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == repr("raise ValueError(y)")  # the traceback shows the patched line
    marks, g, mod_file, timer_file = lines[1].rsplit(" ", 3)
    assert (marks, g) == ("['f']", "g")
    assert mod_file == str(tree / "demopkg" / "mod.py")  # compiled under the original filename
    assert timer_file == str(hook.path / "created" / "demopkg" / "phase_timer.py")
    assert lines[2] == "source: True"
    assert "patchkit import mode: 2 modules patched in memory" in proc.stderr
    assert _hashes(tree) == before
    assert not list(tree.rglob("__pycache__"))
    assert not (tree / ".patchkit").exists()
    # With bytecode on, Python caches the modules it loads itself; the hook's, never
    _writable(tree)
    assert _python(hook, tree, CHECK, bytecode=False).returncode == 0
    cached = sorted(p.name.split(".")[0] for p in tree.rglob("*.pyc"))
    assert cached == ["__init__"]


def test_without_the_hook_the_original_runs(tmp_path, tree):
    proc = subprocess.run(
        [sys.executable, "-c", "import demopkg.mod as m; print(m.f(1))"],
        env=dict(os.environ, PYTHONPATH=str(tree)),
        capture_output=True,
        text=True,
    )
    assert proc.stdout.strip() == "2"


def _refused(proc: subprocess.CompletedProcess, match: str) -> None:
    assert proc.returncode == REFUSED_EXIT, (proc.stdout, proc.stderr)
    assert "patchkit import mode: refused, the process does not start" in proc.stderr
    assert match in proc.stderr
    assert proc.stdout == ""  # the program's own code never ran


def test_file_not_matching_its_pin_refuses_to_start(tmp_path, tree):
    hook = write_hook(str(_series(tmp_path)), str(tree), tmp_path / "hook")
    (tree / "demopkg" / "mod.py").write_bytes(MOD + b"# edited\n")
    _refused(_python(hook, tree, "print('ran')"), "mod.py: not the pinned text")


def test_hunk_that_does_not_apply_refuses_to_start(tmp_path, tree):
    hook = write_hook(str(_series(tmp_path)), str(tree), tmp_path / "hook")
    # A series pinned to this very file whose hunk expects another line: its plan, as data
    wrong = MOD.replace(b"return 'g'", b"return 'G'")
    bad_dir = tmp_path / "bad"
    diff = git_diff({"demopkg/mod.py": wrong}, {"demopkg/mod.py": wrong.replace(b"'G'", b"'H'")}, bad_dir)
    bad = make_series(bad_dir / "series-dir", {"demopkg/mod.py": MOD}, [("0001.patch", diff)])
    doc, _ = hook_data(load_series(str(bad)), str(tree))
    (hook.path / HOOK_FILE).write_text(json.dumps(doc))
    _refused(_python(hook, tree, "print('ran')"), "0001.patch hunk 1")
    with pytest.raises(InvalidInput, match=r"series is inconsistent: .*line 7: expected"):  # nor written
        write_hook(str(bad), str(tree), tmp_path / "hook2")
    assert not (tmp_path / "hook2").exists()


def test_module_imported_before_the_hook_refuses(tmp_path, tree):
    hook = write_hook(str(_series(tmp_path)), str(tree), tmp_path / "hook")
    # -S: site (and so sitecustomize) runs only when the program calls it, after its import
    code = f"import sys; sys.path[:0] = [{str(hook.path)!r}, {str(tree)!r}]; import demopkg.mod; import site; site.main(); print('ran')"
    _refused(_python(hook, tree, code, "-S"), "already imported before the hook ran: demopkg.mod")


def test_created_module_already_present_refuses(tmp_path, tree):
    hook = write_hook(str(_series(tmp_path)), str(tree), tmp_path / "hook")
    (tree / "demopkg" / "phase_timer.py").write_bytes(TIMER)
    _refused(_python(hook, tree, "print('ran')"), "phase_timer.py: the series creates it, but it exists")


def test_other_copy_of_the_package_first_is_refused_at_import(tmp_path, tree):
    hook = write_hook(str(_series(tmp_path)), str(tree), tmp_path / "hook")
    other = _tree(tmp_path / "other")
    env = import_env(hook)
    env["PYTHONPATH"] += os.pathsep.join(["", str(other), str(tree)])
    proc = subprocess.run(
        [sys.executable, "-c", "import demopkg.mod"], env=env, capture_output=True, text=True
    )
    assert proc.returncode == 1
    assert "ImportRefused: demopkg.mod would load from" in proc.stderr
    assert f"not from the checked {tree / 'demopkg' / 'mod.py'}" in proc.stderr


def test_hook_folder_inside_the_target_is_invalid(tmp_path, tree):
    with pytest.raises(InvalidInput, match="inside the target"):
        write_hook(str(_series(tmp_path)), str(tree), tree / "hook")
    assert not (tree / "hook").exists()


def test_the_shadowed_sitecustomize_still_runs(tmp_path, tree):
    hook = write_hook(str(_series(tmp_path)), str(tree), tmp_path / "hook")
    other = tmp_path / "other-site"
    other.mkdir()
    (other / "sitecustomize.py").write_text("import sys\nsys.stderr.write('their sitecustomize ran\\n')\n")
    env = import_env(hook)
    env["PYTHONPATH"] += os.pathsep.join(["", str(other), str(tree)])
    proc = subprocess.run(
        [sys.executable, "-c", "import demopkg.mod as m; print(m.g())"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0 and proc.stdout == "g\n", proc.stderr
    assert "their sitecustomize ran" in proc.stderr and "modules patched in memory" in proc.stderr
