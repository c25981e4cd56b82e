"""Where a line sits in Python source, by structure: the check behind rebase's merged hunks.

A line's *spot* is what a reader would say about its place: the function it is in (qualified
name), the compound statements around it inside that function (``if x`` / else, ``with ...``,
``for ...``), and the statements right before and after it in the same block, normalised with
``ast.unparse`` so that re-wrapping or re-quoting upstream does not count as a move. Lines that
are part of a statement they did not create (an added keyword argument, a comment inside a
call) are spotted by that enclosing statement instead.

``changed`` names the lines the hunk itself adds (or removes): statements made only of those
lines are skipped when looking for the neighbours, so a hunk that inserts two lines is judged by
the code around both.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


@dataclass(frozen=True)
class Spot:
    scope: str  # "Class.method", "function", or "<module>"
    blocks: tuple[str, ...]  # enclosing compound headers inside the scope, with the branch
    before: str  # the previous statement in the block, or "<start of block>"
    after: str  # the next statement in the block, or "<end of block>"
    inside: str = ""  # the enclosing statement, when the line is part of one
    # where the neighbours start (1-based; 0: none) - for callers, not part of the comparison
    before_line: int = field(default=0, compare=False)
    before_end: int = field(default=0, compare=False)
    after_line: int = field(default=0, compare=False)
    after_end: int = field(default=0, compare=False)

    def __str__(self) -> str:
        where = " > ".join(self.blocks) or "top level"
        if self.inside:
            return f"in `{self.scope}` ({where}), inside `{_clip(self.inside)}`"
        return f"in `{self.scope}` ({where}), after `{_clip(self.before)}`, before `{_clip(self.after)}`"


def _clip(text: str, width: int = 70) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def header(node: ast.stmt) -> str:
    """A statement's normalised text; a compound statement by its header only."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return f"def {node.name}"
    if isinstance(node, ast.ClassDef):
        return f"class {node.name}"
    if isinstance(node, (ast.If, ast.While)):
        return f"{'if' if isinstance(node, ast.If) else 'while'} {ast.unparse(node.test)}"
    if isinstance(node, (ast.For, ast.AsyncFor)):
        return f"for {ast.unparse(node.target)} in {ast.unparse(node.iter)}"
    if isinstance(node, (ast.With, ast.AsyncWith)):
        return "with " + ", ".join(ast.unparse(item) for item in node.items)
    if isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
        return "try"
    if isinstance(node, ast.Match):
        return f"match {ast.unparse(node.subject)}"
    return ast.unparse(node)


def _first_line(node: ast.stmt) -> int:
    decorators = getattr(node, "decorator_list", None) or []
    return min([node.lineno] + [d.lineno for d in decorators])


def _blocks(node: ast.stmt) -> list[tuple[str, list[ast.stmt]]]:
    """The statement lists inside a compound statement, each with a label of its branch."""
    out = []
    for name in ("body", "orelse", "finalbody"):
        body = getattr(node, name, None)
        if body and isinstance(body[0], ast.stmt):
            out.append((name, body))
    for handler in getattr(node, "handlers", None) or []:
        kind = ast.unparse(handler.type) if handler.type is not None else ""
        out.append((f"except {kind}".rstrip(), handler.body))
    for case in getattr(node, "cases", None) or []:
        out.append((f"case {ast.unparse(case.pattern)}", case.body))
    return out


class Locator:
    """Spots of lines in one parsed source (1-based line numbers)."""

    def __init__(self, source: bytes, filename: str = "<source>"):
        self.tree = ast.parse(source, filename)

    def spot(self, line: int, changed: frozenset[int] = frozenset()) -> Spot:
        return self._walk(self.tree.body, line, changed, "<module>", (), "<module>")

    def _walk(self, body, line, changed, scope, blocks, owner) -> Spot:
        for _index, node in enumerate(body):
            first, last = _first_line(node), node.end_lineno or node.lineno
            if not first <= line <= last:
                continue
            if all(n in changed for n in range(first, last + 1)):
                break  # a statement the hunk made: between siblings
            inner_scope = scope
            if isinstance(node, _SCOPES):
                inner_scope = node.name if scope == "<module>" else f"{scope}.{node.name}"
            for label, sub in _blocks(node):
                if _first_line(sub[0]) <= line <= (sub[-1].end_lineno or sub[-1].lineno):
                    nested = blocks if isinstance(node, _SCOPES) else blocks + (f"{header(node)}: {label}",)
                    return self._walk(sub, line, changed, inner_scope, nested, header(node))
            return Spot(
                scope, blocks, "", "", inside=ast.unparse(node) if not _blocks(node) else header(node)
            )
        before, after = "<start of block>", "<end of block>"
        span = {"before": (0, 0), "after": (0, 0)}
        for node in body:
            first, last = _first_line(node), node.end_lineno or node.lineno
            if all(n in changed for n in range(first, last + 1)):
                continue
            if last < line:
                before, span["before"] = header(node), (first, last)
            elif first > line and not span["after"][0]:
                after, span["after"] = header(node), (first, last)
        (b0, b1), (a0, a1) = span["before"], span["after"]
        return Spot(scope, blocks, before, after, before_line=b0, before_end=b1, after_line=a0, after_end=a1)


def spots(
    source: bytes, lines: list[int], changed: set[int] | None = None, filename: str = "<source>"
) -> list[Spot]:
    """The spot of each of ``lines`` (1-based); SyntaxError when ``source`` does not parse."""
    locator = Locator(source, filename)
    frozen = frozenset(changed if changed is not None else lines)
    return [locator.spot(n, frozen) for n in lines]


def compile_problem(source: bytes, filename: str) -> str | None:
    """None when ``source`` compiles, else where and why it does not."""
    try:
        compile(source, filename, "exec", dont_inherit=True)
    except SyntaxError as exc:
        return f"line {exc.lineno}: {exc.msg}"
    except ValueError as exc:  # e.g. NUL bytes
        return str(exc)
    return None


__all__ = ["Locator", "Spot", "compile_problem", "header", "spots"]
