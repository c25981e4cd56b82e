"""No function in patchkit/ is over MAX_LINES lines without a reason written beside it.

Read with ``ast`` (nothing is imported): every ``def`` and ``async def`` in patchkit/**/*.py,
nested ones and methods included, nothing skipped. A function's length is ``end_lineno - lineno
+ 1`` of its ``def`` (decorators not counted). One over MAX_LINES needs a one-line comment
``# long: <the reason>`` on the line directly above its ``def``, or above its first decorator
where it has some. A ``# long:`` comment above a function that is no longer long is stale and
fails too, so the reason goes when the length does.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "patchkit"
MAX_LINES = 80
REASON = "# long:"


def functions(source: str) -> list[tuple[str, int, int, str | None]]:
    """(qualified name, line of its def, length, the ``# long:`` reason above it or None) of
    every function in one file's source, in the order they start."""
    lines = source.splitlines()
    found = []

    def visit(node: ast.AST, outer: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{outer}.{child.name}" if outer else child.name
                if not isinstance(child, ast.ClassDef):
                    assert child.end_lineno is not None
                    length = child.end_lineno - child.lineno + 1
                    found.append((name, child.lineno, length, reason_above(lines, child)))
                visit(child, name)
            else:
                visit(child, outer)

    visit(ast.parse(source), "")
    return sorted(found, key=lambda f: f[1])


def reason_above(lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """The text of a ``# long:`` comment on the line directly above the def (above its first
    decorator where it has some); "" for the prefix with no reason after it; None for none."""
    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
    if first < 2:
        return None
    above = lines[first - 2].strip()
    if not above.startswith(REASON):
        return None
    return above[len(REASON) :].strip()


def package_functions() -> list[tuple[str, str, int, int, str | None]]:
    """(path from the repository root, qualified name, line, length, reason) over patchkit/."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        out += [(rel, *f) for f in functions(path.read_text(encoding="utf-8"))]
    return out


def test_no_function_over_the_limit_without_a_reason():
    over = [
        f"{path}:{line} {name}: {length} lines"
        for path, name, line, length, reason in package_functions()
        if length > MAX_LINES and not reason
    ]
    assert not over, (
        f"functions over {MAX_LINES} lines: split them into helpers, or write the reason on the "
        f"line above the def (or its decorators) as `{REASON} <reason>`:\n" + "\n".join(over)
    )


def test_no_reason_outlives_its_length():
    stale = [
        f"{path}:{line} {name}: {length} lines, yet `{REASON} {reason}`"
        for path, name, line, length, reason in package_functions()
        if reason is not None and length <= MAX_LINES
    ]
    assert not stale, f"`{REASON}` above a function of {MAX_LINES} lines or fewer: remove it:\n" + "\n".join(
        stale
    )


def test_a_reason_is_read_above_the_def_or_its_decorators():
    source = "\n".join(
        [
            "# long: a flat parser",
            "def plain():",
            "    pass",
            "",
            "# long: a template",
            "@decorated",
            "@twice",
            "def wrapped():",
            "    pass",
            "",
            "@decorated",
            "# long: between the decorators does not count",
            "def misplaced():",
            "    pass",
            "",
            "# long:",
            "class Holder:",
            "    # long:",
            "    def empty(self):",
            "        def inner():",
            "            pass",
            "",
            "def bare():",
            "    pass",
        ]
    )
    got = {name: (length, reason) for name, _, length, reason in functions(source)}
    assert got == {
        "plain": (2, "a flat parser"),
        "wrapped": (2, "a template"),
        "misplaced": (2, None),
        "Holder.empty": (3, ""),
        "Holder.empty.inner": (2, None),
        "bare": (2, None),
    }
