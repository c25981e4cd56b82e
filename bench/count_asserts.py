"""How many checks the tests hold at one or more git revisions: ``assert`` statements and
``pytest.raises`` / ``pytest.fail`` / ``pytest.warns`` calls in every .py file under tests/,
read from git (no checkout), by an AST walk (a commented or string "assert" does not count).

Usage: python bench/count_asserts.py REV [REV...]      e.g. 1ca1984 HEAD
"""

from __future__ import annotations

import ast
import io
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHECK_CALLS = ("raises", "fail", "warns")


def count(rev: str) -> tuple[int, int, int]:
    """(test files, assert statements, pytest.raises/fail/warns calls) at ``rev``."""
    data = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "tests"], capture_output=True, check=True
    ).stdout
    files = asserts = calls = 0
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for member in tar.getmembers():
            if not member.name.endswith(".py"):
                continue
            handle = tar.extractfile(member)
            assert handle is not None, member.name
            files += 1
            for node in ast.walk(ast.parse(handle.read(), member.name)):
                if isinstance(node, ast.Assert):
                    asserts += 1
                elif (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr in CHECK_CALLS
                    and isinstance(node.func.value, ast.Name)
                    and node.func.value.id == "pytest"
                ):
                    calls += 1
    return files, asserts, calls


def main() -> int:
    revs = sys.argv[1:] or ["HEAD"]
    print(f"{'revision':12} {'files':>6} {'asserts':>8} {'raises/fail/warns':>18}")
    for rev in revs:
        files, asserts, calls = count(rev)
        print(f"{rev:12} {files:6} {asserts:8} {calls:18}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
