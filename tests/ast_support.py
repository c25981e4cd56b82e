"""Compare patched sources with their originals by AST: the series may only add timer lines.

A timer line is the one import `from <package> import phase_timer as _pt` (absolute or
relative) or a statement calling `_pt.<something>(...)`.
"""

from __future__ import annotations

import ast


def is_inserted(stmt: ast.stmt) -> bool:
    if isinstance(stmt, ast.ImportFrom):
        return [(a.name, a.asname) for a in stmt.names] == [("phase_timer", "_pt")]
    return (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Attribute)
            and isinstance(stmt.value.func.value, ast.Name) and stmt.value.func.value.id == "_pt")


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
