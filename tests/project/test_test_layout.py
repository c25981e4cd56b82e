"""The tests' own layout: a test module takes its helpers from the package tests/support/ only,
never from another test module, and nothing but pytest's configuration puts folders on sys.path.

Read with ``ast`` (nothing is imported). Every ``import X`` / ``from X import ...`` (module-level
or inside a function) and every ``importlib.import_module("X")`` / ``__import__("X")`` with a
literal name counts; X may not be, nor pass through, a module named ``test_*`` or ``conftest``.
The conftest.py files may not change sys.path: support/ is importable because pyproject.toml's
``[tool.pytest.ini_options] pythonpath`` names tests/ (and the repository root), so a test room
is never on sys.path for another room to import from.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent


def sources() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts)


def _is_test_module(dotted: str) -> bool:
    return any(part.startswith("test_") or part == "conftest" for part in dotted.split("."))


def imported_test_modules(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, module) of every import of a test module or a conftest in one parsed file."""
    found = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if base and _is_test_module(base):
                names = [base]
            else:  # `from . import test_x` / `from pkg import test_x`: a name may be a module
                names = [f"{base}.{alias.name}" if base else alias.name for alias in node.names]
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            first = node.args[0]
            if (
                called in ("import_module", "__import__")
                and isinstance(first, ast.Constant)
                and isinstance(first.value, str)
            ):
                names = [first.value]
        found += [(node.lineno, name) for name in names if _is_test_module(name)]
    return sorted(set(found))


def _is_sys_path(node: ast.AST) -> bool:
    """``sys.path`` itself, or an item or slice of it."""
    if isinstance(node, ast.Subscript):
        node = node.value
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "path"
        and isinstance(node.value, ast.Name)
        and node.value.id == "sys"
    )


def sys_path_changes(tree: ast.AST) -> list[int]:
    """Lines that change sys.path: a call of one of its methods that adds or removes entries,
    an assignment to it (or to a slice of it), an augmented assignment."""
    lines = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("insert", "append", "extend", "remove", "pop", "clear")
            and _is_sys_path(node.func.value)
        ):
            lines.append(node.lineno)
        elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(_is_sys_path(t) for t in targets):
                lines.append(node.lineno)
    return sorted(lines)


def test_no_test_module_imports_another_test_module():
    bad = []
    for path in sources():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        bad += [
            f"{path.relative_to(REPO)}:{line}: imports {name}" for line, name in imported_test_modules(tree)
        ]
    assert not bad, "helpers shared between test modules belong in tests/support/:\n" + "\n".join(bad)


def test_no_conftest_changes_sys_path():
    conftests = sorted(TESTS.rglob("conftest.py"))
    assert TESTS / "conftest.py" in conftests
    bad = []
    for path in conftests:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        bad += [f"{path.relative_to(REPO)}:{line}" for line in sys_path_changes(tree)]
    assert not bad, (
        "sys.path is pytest's configuration (pyproject.toml `pythonpath`), changed at:\n" + "\n".join(bad)
    )


def test_support_is_importable_through_the_pytest_configuration():
    options = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    paths = [(REPO / p).resolve() for p in options.get("pythonpath", [])]
    assert TESTS in paths and REPO in paths, options.get("pythonpath")


def test_the_checks_see_what_they_look_for():
    """The two readers above, on sources that do what they forbid."""
    imports = ast.parse(
        "import test_a\n"
        "from test_b import x\n"
        "from support import test_c\n"
        "import support.engine\n"
        "def f():\n"
        "    from conftest import y\n"
        "    importlib.import_module('test_d')\n"
        "from support.cli import invoke\n"
    )
    assert [name for _, name in imported_test_modules(imports)] == [
        "test_a",
        "test_b",
        "support.test_c",
        "conftest",
        "test_d",
    ]
    changes = ast.parse(
        "import sys\n"
        "sys.path.insert(0, 'a')\n"
        "sys.path.append('b')\n"
        "sys.path[:0] = ['c']\n"
        "sys.path += ['d']\n"
        "print(sys.path)\n"
        "paths.insert(0, 'e')\n"
    )
    assert sys_path_changes(changes) == [2, 3, 4, 5]
