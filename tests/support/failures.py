"""Helpers for the failure-path tests: a small real tree and series, the real CLI, tree digests."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

from support import cli
from support.engine import make_series, write_tree

REPO = Path(__file__).resolve().parents[2]
ORIG = b"".join(b"line %d\n" % i for i in range(1, 21))
GOOD = (
    b"diff --git a/pkg/m.py b/pkg/m.py\n--- a/pkg/m.py\n+++ b/pkg/m.py\n"
    b"@@ -4,3 +4,4 @@\n line 4\n line 5\n+inserted\n line 6\n"
)


def invoke(*args, cwd=REPO, env=None, timeout=120) -> subprocess.CompletedProcess:
    """support.cli.invoke with this checkout on PYTHONPATH and ``env`` over the environment."""
    return cli.invoke(
        *args, cwd=cwd, env=dict(os.environ, PYTHONPATH=str(REPO), **(env or {})), timeout=timeout
    )


def small_target(root: Path) -> Path:
    write_tree(root, {"pkg/m.py": ORIG, "pkg/other.py": b"x\n"})
    return root


def small_series(directory: Path, patch: bytes = GOOD, pinned=None) -> Path:
    return make_series(
        directory, pinned if pinned is not None else {"pkg/m.py": ORIG}, [("0001.patch", patch)]
    )


def tree_digest(root: Path) -> str:
    """sha256 over every path, mode and content below root (directories included)."""
    h = hashlib.sha256()
    for p in sorted(Path(root).rglob("*")):
        rel = str(p.relative_to(root)).encode()
        st = p.lstat()
        h.update(rel + b"\0" + oct(st.st_mode).encode() + b"\0")
        if p.is_file() and not p.is_symlink():
            h.update(p.read_bytes())
        h.update(b"\n")
    return h.hexdigest()


def one_line(stderr: str) -> str:
    """The one message a failure prints (progress notes from --series auto aside)."""
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, f"expected one line on stderr, got {lines!r}"
    return lines[0]


def json_doc(stdout: str) -> dict:
    doc = json.loads(stdout)
    assert isinstance(doc, dict)
    return doc
