"""A small package and a series for import mode (made by real git): ``demopkg/mod.py``
patched to call the runtime the series creates (``demopkg/phase_timer.py``) and then raise."""

from __future__ import annotations

import hashlib
from pathlib import Path

from support.engine import git_diff, make_series, write_tree

MOD = b"def f(x):\n    y = x + 1\n    return y\n\n\ndef g():\n    return 'g'\n"
PATCHED = (
    b"def f(x):\n    y = x + 1\n    _pt.mark('f')\n    raise ValueError(y)\n\n\ndef g():\n    return 'g'\n"
)
TIMER = b"MARKS = []\n\n\ndef mark(name):\n    MARKS.append(name)\n"


def demo_series(tmp_path: Path, mod_after: bytes = PATCHED, name="demo-series") -> Path:
    before = {"demopkg/mod.py": MOD, "demopkg/phase_timer.py": None}
    after = {
        "demopkg/mod.py": b"from demopkg import phase_timer as _pt\n" + mod_after,
        "demopkg/phase_timer.py": TIMER,
    }
    diff = git_diff(before, after, tmp_path / name)
    return make_series(tmp_path / name, {"demopkg/mod.py": MOD}, [("0001-timer.patch", diff)])


def demo_tree(tmp_path: Path) -> Path:
    root = tmp_path / "site"
    write_tree(root, {"demopkg/__init__.py": b"", "demopkg/mod.py": MOD})
    return root


def tree_hashes(root: Path) -> dict[str, str]:
    """{path: sha256} of every file below ``root``, "dir" for each folder (a new empty one counts)."""
    return {
        str(p.relative_to(root)): "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
    }
