"""The small tree the crash, kill and interrupt tests patch, and how they check it afterwards.

BEFORE and AFTER: every file of the tree before and after its one patch (None: absent), two
directories, a file without a final newline, a created file in a new directory, a deleted file.
The fault tests make their series from them (``support.engine.git_diff``) and, after a fault,
hold every file to one of the two forms (assert_each_file_whole) or a git checkout of BEFORE
(checkout) to exactly what it was (snapshot, .git included).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from support.engine import git, read_tree, write_tree

BEFORE = {
    "pkg/a.py": b"".join(b"a%d\n" % i for i in range(30)),
    "pkg/b.py": b"b0\nb1\nb2",
    "lib/c.py": b"c0\nc1\n",
    "lib/gone.py": b"bye\n",
    "lib/new/d.py": None,
}
AFTER = {
    "pkg/a.py": BEFORE["pkg/a.py"].replace(b"a3\n", b"a3\nINSERT\n").replace(b"a20\n", b""),
    "pkg/b.py": b"b0\nB1\nb2\n",
    "lib/c.py": b"c0\nc1\nc2\n",
    "lib/gone.py": None,
    "lib/new/d.py": b"new file\n",
}


def assert_each_file_whole(root: Path) -> dict[str, str]:
    """Every file of the tree under ``root`` is its BEFORE or its AFTER form: {path: "original"
    or "patched"}; anything else fails the test."""
    got = read_tree(root, BEFORE.keys())
    states = {}
    for path, data in got.items():
        if data == BEFORE[path]:
            states[path] = "original"
        elif data == AFTER[path]:
            states[path] = "patched"
        else:
            pytest.fail(f"{path} is neither original nor patched: {data!r}")
    return states


def checkout(root: Path, exclude: str = "template") -> Path:
    """A git checkout of BEFORE; `exclude` shapes .git/info/exclude (what apply appends to)."""
    shutil.rmtree(root, ignore_errors=True)
    write_tree(root, {k: v for k, v in BEFORE.items() if v is not None})
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    info = root / ".git" / "info"
    if exclude == "no-final-newline":
        (info / "exclude").write_bytes(b"# mine\n*.log")
    elif exclude == "no-file":
        (info / "exclude").unlink(missing_ok=True)
    elif exclude == "no-info-dir":
        shutil.rmtree(info, ignore_errors=True)
    return root


def snapshot(root: Path) -> dict:
    """Every directory, file (bytes and mode) and symlink under root, .git included."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            st = p.lstat()
            if p.is_symlink():
                out[rel] = ("link", os.readlink(p))
            elif p.is_dir():
                out[rel] = ("dir", st.st_mode)
            else:
                out[rel] = ("file", st.st_mode, p.read_bytes())
    return out
