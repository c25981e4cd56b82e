"""Compare patched sources with their originals by AST: the series may only add timer lines.

A timer line is the one import `from <package> import phase_timer as _pt` (absolute or
relative) or a statement calling `_pt.<something>(...)`.
"""

from __future__ import annotations

import ast


def is_inserted(stmt: ast.stmt) -> bool:
    if isinstance(stmt, ast.ImportFrom):
        return [(a.name, a.asname) for a in stmt.names] == [("phase_timer", "_pt")]
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Call)
        and isinstance(stmt.value.func, ast.Attribute)
        and isinstance(stmt.value.func.value, ast.Name)
        and stmt.value.func.value.id == "_pt"
    )


def strip_inserted(tree: ast.AST) -> int:
    """Remove every timer line from `tree` in place; return how many there were."""
    removed = 0
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                kept = [s for s in block if not is_inserted(s)]
                removed += len(block) - len(kept)
                block[:] = kept
    return removed


def timer_calls_by_function(source: str) -> dict[str, list[tuple[str, str]]]:
    """function name -> [(timer call, phase name)] in source order, for balance checks."""
    calls: dict[str, list[tuple[str, str]]] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef):
            for sub in ast.walk(node):
                if isinstance(sub, ast.Expr) and is_inserted(sub):
                    call = sub.value
                    label = call.args[0].value if call.args else ""
                    calls.setdefault(node.name, []).append((call.func.attr, label))
    return calls
