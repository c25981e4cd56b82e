"""Place single-line timer statements into another release's file by structure, not by line.

A reference series (pristine files + patches) says where each timer line sits: the function it
is in (qualified name, e.g. ``EAGLEWorker.draft``) and the statement right after it in the same
block (or, for the last line of a block, the statement right before it), compared by
``ast.unparse`` text, so re-wrapped code still matches. ``learn`` reads those anchors from the
reference; ``place`` finds the same function and anchor statement in a new release's pristine
file and inserts the line there with the anchor's indentation.

Matching an anchor, strictest first: the same normalised statement; then the same statement
"shape" (assignment targets and called name, e.g. ``parent_list, ... = self.cuda_graph_runner.
replay(...)``). Several candidates are narrowed by the enclosing compound statement's header
(``if can_cuda_graph:``), then by the reference's ordinal among equal anchors. Nothing is ever
guessed: a line without exactly one candidate is not placed, and every line of a phase (all
begins and ends of one name in one function, or a function's whole cycle) is placed together or
not at all, so a release never gets half a phase. What the tool leaves out is reported and can be
placed by a hand rule (``HandRule``: function, anchor text, side).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from patchkit.author.authoring import apply_patch, diff_states, split_header
from patchkit.errors import InvalidInput

TIMER_MODULE = "phase_timer"
TIMER_ALIAS = "_pt"
FUNCTION_START = "<function body>"
FUNCTION_END = "<end of function body>"
# A placed phase must call at least this share of the names its reference span called, and
# those must be at least this share of what it calls here (tuned on the 0.5.1 ... 0.5.23 matrix).
SPAN_MIN_KEPT = 0.5
SPAN_MIN_SHARE = 0.34


# ----------------------------------------------------------------------------- what a timer line is


def is_timer_stmt(stmt: ast.stmt) -> bool:
    if isinstance(stmt, ast.ImportFrom):
        return [(a.name, a.asname) for a in stmt.names] == [(TIMER_MODULE, TIMER_ALIAS)]
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Call)
        and isinstance(stmt.value.func, ast.Attribute)
        and isinstance(stmt.value.func.value, ast.Name)
        and stmt.value.func.value.id == TIMER_ALIAS
    )


def timer_kind(stmt: ast.stmt) -> tuple[str, str]:
    """(call, phase) of a timer statement: ("begin", "draft_forward"), ("cycle_end", "")..."""
    if isinstance(stmt, ast.ImportFrom):
        return "import", ""
    call = _call_of(stmt)
    assert isinstance(call.func, ast.Attribute), "a timer statement (is_timer_stmt)"
    first = call.args[0] if call.args else None
    label = first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else ""
    return call.func.attr, label


def _call_of(stmt: ast.stmt) -> ast.Call:
    """The call of an expression statement that is one call (a timer line)."""
    assert isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call), "a call statement"
    return stmt.value


# ----------------------------------------------------------------------------- statement keys


def _header(stmt: ast.stmt) -> str:
    """A compound statement's header (its body left out); a simple statement's whole text."""
    if isinstance(stmt, ast.If):
        return "if " + ast.unparse(stmt.test)
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        return f"for {ast.unparse(stmt.target)} in {ast.unparse(stmt.iter)}"
    if isinstance(stmt, ast.While):
        return "while " + ast.unparse(stmt.test)
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return "with " + ", ".join(ast.unparse(i) for i in stmt.items)
    if isinstance(stmt, ast.Try):
        return "try"
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return "def " + stmt.name
    if isinstance(stmt, ast.ClassDef):
        return "class " + stmt.name
    return ast.unparse(stmt)


def _is_docstring(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    )


def _tail(stmt: ast.stmt) -> str:
    """Loosest of all: assignment targets and the last part of the called name
    (``target_worker.forward_batch_generation`` = ``self.target_worker.forward_batch_generation``)."""
    value = (
        getattr(stmt, "value", None)
        if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.Expr, ast.Return))
        else None
    )
    name = _called(value).rsplit(".", 1)[-1]
    if not name:
        return ""
    targets = ast.unparse(stmt.targets[0]) if isinstance(stmt, ast.Assign) else type(stmt).__name__
    return f"{targets} <- *.{name}"


def _called(node: ast.AST | None) -> str:
    if isinstance(node, ast.Await):
        node = node.value
    if isinstance(node, ast.Call):
        return ast.unparse(node.func)
    return ""


def _shape(stmt: ast.stmt) -> str:
    """A looser key: targets and the called name (arguments ignored); '' when there is none."""
    if isinstance(stmt, ast.Assign):
        value = _called(stmt.value)
        return f"{' = '.join(ast.unparse(t) for t in stmt.targets)} = {value}(...)" if value else ""
    if isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
        value = _called(stmt.value)
        return f"{ast.unparse(stmt.target)}: = {value}(...)" if value else ""
    if isinstance(stmt, ast.Expr):
        value = _called(stmt.value)
        return f"{value}(...)" if value else ""
    if isinstance(stmt, ast.Return):
        value = _called(stmt.value)
        return f"return {value}(...)" if value else ""
    return ""


def _callname(stmt: ast.stmt) -> str:
    """The loosest key: just the called name of an assignment, expression or return."""
    value = (
        getattr(stmt, "value", None)
        if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.Expr, ast.Return))
        else None
    )
    name = _called(value)
    return f"call {name}" if name else ""


# ----------------------------------------------------------------------------- walking a module


@dataclass
class Site:
    """One statement of a function body, with where it sits."""

    stmt: ast.stmt
    function: str  # qualified name, e.g. "EAGLEWorker.draft"
    parent: str  # header of the enclosing compound statement ("" at function level)
    block: list  # the statement list it belongs to
    index: int  # its index in that list
    params: tuple = ()  # the function's parameter names (self/cls left out)

    # The keys below name the function's parameters by position (``_arg0_``), so that a
    # parameter renamed between releases (``batch`` -> ``model_worker_batch``) still matches.
    @property
    def key(self) -> str:
        return self._cached("key", lambda: _header(self.stmt))

    @property
    def shape(self) -> str:
        return self._cached("shape", lambda: _shape(self.stmt))

    @property
    def callname(self) -> str:
        return self._cached("callname", lambda: _callname(self.stmt))

    @property
    def tail(self) -> str:
        return self._cached("tail", lambda: _tail(self.stmt))

    @property
    def where(self) -> str:
        return self._cached("where", lambda: self.parent)

    def _cached(self, name: str, make) -> str:
        cache = self.__dict__.setdefault("_keys", {})
        if name not in cache:
            cache[name] = _normalise(make(), self.params)
        return cache[name]


def _normalise(text: str, params: tuple) -> str:
    if not text or not params:
        return text
    index = {p: i for i, p in enumerate(params)}
    return _name_re(params).sub(lambda m: f"_arg{index[m.group(1)]}_", text)


def _name_re(names):
    import re

    return re.compile(r"(?<![\w.])(" + "|".join(re.escape(n) for n in names) + r")\b")


def rename_params(text: str, old: tuple, new: tuple) -> str:
    """The timer line with the reference function's parameters named as in the new one."""
    mapping = {o: n for o, n in zip(old, new) if o != n}
    if not mapping:
        return text
    return _name_re(tuple(mapping)).sub(lambda m: mapping[m.group(1)], text)


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> tuple:
    args = fn.args
    names = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
    return tuple(n for n in names if n not in ("self", "cls"))


def _sites(tree: ast.Module):
    """Every statement inside a function, depth first in source order."""

    def walk_block(block, qual, parent, params):
        for i, stmt in enumerate(block):
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inner = f"{qual}.{stmt.name}" if qual else stmt.name
                yield from walk_block(stmt.body, inner, "", _params(stmt))
                continue
            if isinstance(stmt, ast.ClassDef):
                yield from walk_block(stmt.body, f"{qual}.{stmt.name}" if qual else stmt.name, "", ())
                continue
            if qual and not _is_class_scope(qual, tree):
                yield Site(stmt, qual, parent, block, i, params)
            header = _header(stmt)
            for name in ("body", "orelse", "finalbody"):
                sub = getattr(stmt, name, None)
                if isinstance(sub, list) and sub and isinstance(sub[0], ast.stmt):
                    yield from walk_block(
                        sub, qual, header + ("" if name == "body" else f" [{name}]"), params
                    )
            for handler in getattr(stmt, "handlers", []) or []:
                yield from walk_block(handler.body, qual, header + " [except]", params)

    yield from walk_block(tree.body, "", "", ())


def _is_class_scope(qual: str, tree: ast.Module) -> bool:
    return isinstance(_find_def(tree, qual), ast.ClassDef)


def _top_import_anchor(tree: ast.Module) -> ast.stmt | None:
    """The last module-level import before the first def or class: the timer import goes after."""
    last = None
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            break
        if isinstance(stmt, (ast.Import, ast.ImportFrom)) and not is_timer_stmt(stmt):
            last = stmt
    return last


# ----------------------------------------------------------------------------- learning anchors


@dataclass
class Probe:
    """One way to find the spot: the statement ``side`` of which the line goes."""

    side: str  # "before" (the line precedes it) or "after"
    key: str  # _header of that statement
    shape: str
    callname: str
    tail: str
    parent: str  # header of the block it is in
    ordinal: int  # among the function's statements with the same key
    equals: int  # how many such statements the reference function has


@dataclass
class Anchor:
    """Where one timer line sits in the reference."""

    path: str  # reference file (checkout path)
    text: str  # the statement, stripped (e.g. '_pt.begin("draft_forward")')
    call: str  # begin / end / cycle_begin / note / import ...
    phase: str
    patch: str  # the reference patch that adds it
    function: str = ""  # "" for the module-level import
    probes: list = field(default_factory=list)  # next statement first, then the previous one
    first_in: str = ""  # the line opens the block with this header (when it does)
    last_in: str = ""  # FUNCTION_END when the line closes the function body
    params: tuple = ()  # the reference function's parameters (renamed positionally)
    spot: str = ""  # where it sits in the reference (lines at one spot stay together)
    span: frozenset = frozenset()  # names the reference phase calls between its begin and end
    group: str = ""  # lines placed together or not at all
    identity: tuple = ()  # what the group times, whatever function it is in: a phase name,
    # or ("cycle:decode", "cycle:prefill"); a release never gets one twice
    line: int = 0  # its 1-based line in the reference file

    @property
    def key(self) -> str:
        return self.probes[0].key if self.probes else self.first_in


def _line_origins(states: list[dict[str, str]], names: list[str], path: str) -> list[str]:
    """For the final text of ``path``: the patch that added each line ('' = pristine)."""
    import difflib

    origins: list[str] | None = None
    for k in range(1, len(states)):
        before, after = states[k - 1].get(path), states[k].get(path)
        if after is None:
            continue
        new_lines = after.splitlines(keepends=True)
        if before is None:
            origins = [names[k - 1]] * len(new_lines)
            continue
        old_origins = origins if origins is not None else [""] * len(before.splitlines(True))
        matcher = difflib.SequenceMatcher(None, before.splitlines(True), new_lines, autojunk=False)
        fresh: list[str] = []
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                fresh += old_origins[i1:i2]
            else:
                fresh += [names[k - 1]] * (j2 - j1)
        origins = fresh
    return origins or []


def learn(path: str, patched: str, origins: list[str]) -> list[Anchor]:
    """Anchors of every timer line in ``patched`` (the reference file, all patches applied)."""
    tree = ast.parse(patched)
    lines = patched.splitlines()
    anchors: list[Anchor] = []
    for stmt in tree.body:
        if is_timer_stmt(stmt):
            anchors.append(
                Anchor(
                    path,
                    lines[stmt.lineno - 1].strip(),
                    "import",
                    "",
                    origins[stmt.lineno - 1],
                    group=f"{path}:import",
                    line=stmt.lineno,
                )
            )
    all_sites = list(_sites(tree))
    by_stmt = {id(s.stmt): s for s in all_sites}
    for site in all_sites:
        if not is_timer_stmt(site.stmt):
            continue
        call, phase = timer_kind(site.stmt)
        block = site.block
        after = [s for s in block[site.index + 1 :] if not is_timer_stmt(s)]
        before = [s for s in block[: site.index] if not is_timer_stmt(s) and not _is_docstring(s)]
        probes = []
        for probe_at, side in (
            (after[0] if after else None, "before"),
            (before[-1] if before else None, "after"),
        ):
            if probe_at is None:
                continue
            ref = by_stmt[id(probe_at)]
            same = [
                s
                for s in all_sites
                if s.function == site.function and not is_timer_stmt(s.stmt) and s.key == ref.key
            ]
            ordinal = next(i for i, s in enumerate(same) if s.stmt is probe_at)
            probes.append(
                Probe(side, ref.key, ref.shape, ref.callname, ref.tail, ref.where, ordinal, len(same))
            )
        anchors.append(
            Anchor(
                path,
                lines[site.stmt.lineno - 1].strip(),
                call,
                phase,
                origins[site.stmt.lineno - 1],
                site.function,
                probes,
                (site.where or FUNCTION_START) if not before else "",
                FUNCTION_END if not after and not site.parent else "",
                params=site.params,
                spot=f"{site.function}@{(after[0] if after else before[-1]).lineno}",
                line=site.stmt.lineno,
            )
        )
    _assign_groups(anchors)
    _learn_spans(anchors, all_sites, tree)
    return anchors


def _called_names(stmts) -> frozenset:
    """The last part of every called name in ``stmts`` (``self.draft_runner.forward`` -> forward)."""
    names = set()
    for stmt in stmts:
        if is_timer_stmt(stmt):
            continue
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call) and not (
                isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == TIMER_ALIAS
            ):
                names.add(ast.unparse(node.func).rsplit(".", 1)[-1])
    return frozenset(names)


def _span_sites(sites, function: str | None, first: int, last: int) -> list:
    """Statements of ``function`` that start on lines first..last (1-based, inclusive)."""
    return [s.stmt for s in sites if s.function == function and first <= s.stmt.lineno <= last]


def _learn_spans(anchors: list, sites, tree) -> None:
    lines: dict[str, list[int]] = {}
    for site in sites:
        if is_timer_stmt(site.stmt):
            call, phase = timer_kind(site.stmt)
            if call in ("begin", "end"):
                lines.setdefault(f"{site.function}:{phase}", []).append(site.stmt.lineno)
    for a in anchors:
        if a.group in lines and a.call in ("begin", "end", "note"):
            first, last = min(lines[a.group]), max(lines[a.group])
            a.span = _called_names(_span_sites(sites, a.function, first, last))


def _assign_groups(anchors: list[Anchor]) -> None:
    """begin/end of one phase in one function form a group; a function's cycle lines another;
    a note joins the line before it."""
    previous = None
    for a in anchors:
        if a.call == "import":
            continue
        if a.call in ("begin", "end"):
            a.group = f"{a.function}:{a.phase}"
        elif a.call.startswith("cycle"):
            a.group = f"{a.function}:cycle"
        else:
            a.group = (
                previous.group
                if previous is not None and previous.function == a.function
                else f"{a.function}:{a.call}"
            )
        previous = a
    kinds: dict[str, set[str]] = {}
    for a in anchors:
        if a.call == "cycle_begin":
            kinds.setdefault(a.group, set()).add(a.text.split('kind="', 1)[-1].split('"', 1)[0])
    for a in anchors:
        if a.call == "import":
            a.identity = ("import",)
        elif a.group.endswith(":cycle"):
            a.identity = tuple(f"cycle:{k}" for k in sorted(kinds.get(a.group, ())))
        else:
            a.identity = (a.group.split(":", 1)[1],)


# ----------------------------------------------------------------------------- placing


@dataclass
class HandRule:
    """A placement made by a person: in ``function`` of ``path``, the line goes ``side`` the one
    statement whose unparsed text starts with ``anchor`` (exactly one must)."""

    path: str
    function: str
    anchor: str
    side: str
    text: str
    patch: str
    why: str = ""
    nth: int | None = None  # which of several such statements (0-based), when there are several

    @property
    def identity(self) -> tuple:
        call, phase = timer_kind(ast.parse(self.text).body[0])
        if call.startswith("cycle_begin"):
            kind = self.text.split('kind="', 1)[-1].split('"', 1)[0]
            return ("cycle:" + kind,)
        return (phase,) if phase else ()


@dataclass
class Placement:
    path: str
    line: int  # 0-based index of the line it goes before, in the pristine file
    order: int  # ties at one line keep this order
    text: str  # the full line, indentation included, with newline
    patch: str
    how: str  # "tool: <match>" or "hand: <why>"
    group: str
    anchor: Anchor | HandRule | None = None
    alternatives: list = field(default_factory=list)  # other (line, text, how) the probes found


def _anchor(p: Placement) -> Anchor:
    """The anchor of a placement the tool made (hand rules and the import are placed apart)."""
    assert isinstance(p.anchor, Anchor), "a placement made from an anchor"
    return p.anchor


@dataclass
class Result:
    placements: list[Placement] = field(default_factory=list)
    # (anchor, why); a hand rule's line can be dropped too (seriesgen's open-phase check)
    missing: list[tuple[Anchor | HandRule, str]] = field(default_factory=list)
    skipped: list[tuple[Anchor, str]] = field(default_factory=list)  # not applicable here


def _indent_of(source_lines: list[str], stmt: ast.stmt) -> str:
    line = source_lines[stmt.lineno - 1]
    return line[: len(line) - len(line.lstrip())]


def _function_names(tree: ast.Module) -> dict[str, list[str]]:
    """bare function name -> qualified names (for a class renamed or a method moved)."""
    out: dict[str, list[str]] = {}
    for site in _sites(tree):
        out.setdefault(site.function.rsplit(".", 1)[-1], [])
        if site.function not in out[site.function.rsplit(".", 1)[-1]]:
            out[site.function.rsplit(".", 1)[-1]].append(site.function)
    return out


class Target:
    """A new release's pristine file, parsed once."""

    def __init__(self, path: str, text: str):
        self.path, self.text = path, text
        self.lines = text.splitlines(keepends=True)
        self.tree = ast.parse(text)
        self.sites = [s for s in _sites(self.tree) if not is_timer_stmt(s.stmt)]
        self.names = _function_names(self.tree)

    def params(self, qual: str) -> tuple:
        return next((s.params for s in self.sites if s.function == qual), ())

    def has_function(self, qual: str) -> bool:
        return any(s.function == qual for s in self.sites)

    def resolve_function(self, qual: str, aliases: dict[str, str]) -> str | None:
        """``qual`` itself, else its alias (code moved to another function), else the one
        function of that bare name (a class renamed)."""
        if self.has_function(qual):
            return qual
        if qual in aliases and self.has_function(aliases[qual]):
            return aliases[qual]
        options = self.names.get(qual.rsplit(".", 1)[-1], [])
        return options[0] if len(options) == 1 else None

    def known_names(self, qual: str) -> tuple[set[str], set[str]]:
        """(names used or bound in function ``qual``, attribute names used anywhere in the file)."""
        if not hasattr(self, "_attrs"):
            # Attributes the file reads or writes, and keyword names it passes (a dataclass such
            # as GenerationBatchResult(accept_lens=...) then has that attribute).
            self._attrs = {n.attr for n in ast.walk(self.tree) if isinstance(n, ast.Attribute)}
            self._attrs |= {
                k.arg for n in ast.walk(self.tree) if isinstance(n, ast.Call) for k in n.keywords if k.arg
            }
            self._fn_names: dict[str, set[str]] = {}
        if qual not in self._fn_names:
            names: set[str] = set()
            for site in self.sites:
                if site.function == qual:
                    names |= {n.id for n in ast.walk(site.stmt) if isinstance(n, ast.Name)}
            node = _find_def(self.tree, qual)
            if node is not None:
                names |= {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}
            self._fn_names[qual] = names
        return self._fn_names[qual], self._attrs

    def insertion(self, stmt: ast.stmt, side: str) -> tuple[int, str]:
        assert stmt.end_lineno is not None, "a parsed statement"
        line = stmt.lineno - 1 if side == "before" else stmt.end_lineno
        return line, _indent_of(self.lines, stmt)


def _find_def(tree: ast.Module, qual: str):
    node: ast.AST | None = tree
    for part in qual.split("."):
        node = next(
            (
                n
                for n in getattr(node, "body", [])
                if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == part
            ),
            None,
        )
        if node is None:
            return None
    return node


def unknown_references(text: str, target: Target, function: str) -> list[str]:
    """Names and attributes the timer line's arguments use that this release does not have."""
    import builtins

    call = _call_of(ast.parse(text).body[0])
    names, attrs = target.known_names(function)
    missing = []
    for arg in list(call.args) + [k.value for k in call.keywords]:
        for node in ast.walk(arg):
            if isinstance(node, ast.Name) and node.id not in names and not hasattr(builtins, node.id):
                missing.append(node.id)
            elif isinstance(node, ast.Attribute) and node.attr not in attrs:
                missing.append("." + node.attr)
    return missing


def _branch_gone(a: Anchor, target: Target, function: str) -> bool:
    """An end or cycle_end just before a ``return`` inside a block this release does not have
    at all (an early exit added later): there is no such return to close the phase at. The
    check for phases left open at any return (open_at_returns) still runs on the result."""
    if a.call not in ("end", "cycle_end") or not a.probes:
        return False
    probe = a.probes[0]
    if probe.side != "before" or not probe.key.startswith("return") or not probe.parent:
        return False
    header = probe.parent.split(" [", 1)[0]
    return not any(
        s.key == header or s.where.split(" [", 1)[0] == header for s in target.sites if s.function == function
    )


def open_at_returns(text: str) -> list[tuple[str, int, list[str]]]:
    """(function, line, phases still open) for every return (and function end) that a phase
    begun unconditionally before it, on its own path, has not ended by then. A cycle counts as
    the phase "cycle"."""
    out = []
    for fn in ast.walk(ast.parse(text)):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for path_blocks, ret in _exits(fn):
            opened: list[str] = []
            for block, upto in path_blocks:
                for stmt in block[:upto]:
                    if isinstance(stmt, ast.Expr) and is_timer_stmt(stmt):
                        call, phase = timer_kind(stmt)
                        name = "cycle" if call.startswith("cycle") else phase
                        if call in ("begin", "cycle_begin"):
                            opened.append(name)
                        elif call in ("end", "cycle_end") and name in opened:
                            opened.remove(name)
            if opened:
                out.append((fn.name, ret.lineno if ret is not None else fn.end_lineno or fn.lineno, opened))
    return out


def _exits(fn):
    """(the enclosing blocks with the index of the statement on the path, the exit) for each
    return in ``fn`` (nested functions excluded) and for falling off its end."""
    found: list[tuple[list, ast.Return | None]] = []

    def walk(block, trail):
        for i, stmt in enumerate(block):
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            if isinstance(stmt, ast.Return):
                found.append((trail + [(block, i)], stmt))
            for name in ("body", "orelse", "finalbody"):
                sub = getattr(stmt, name, None)
                if isinstance(sub, list) and sub and isinstance(sub[0], ast.stmt):
                    walk(sub, trail + [(block, i)])
            for handler in getattr(stmt, "handlers", []) or []:
                walk(handler.body, trail + [(block, i)])

    walk(fn.body, [])
    if not _always_exits(fn.body):
        found.append(([(fn.body, len(fn.body))], None))
    return found


def _always_exits(block) -> bool:
    if not block:
        return False
    last = block[-1]
    if isinstance(last, (ast.Return, ast.Raise)):
        return True
    if isinstance(last, ast.If):
        return _always_exits(last.body) and _always_exits(last.orelse)
    if isinstance(last, (ast.With, ast.AsyncWith)):
        return _always_exits(last.body)
    if isinstance(last, ast.Try):
        return _always_exits(last.finalbody) or (
            _always_exits(last.body) and all(_always_exits(h.body) for h in last.handlers)
        )
    return False


def _unproven_uses(text: str, renamed: list[str], target: Target) -> list[str]:
    """``param.attr`` uses of a renamed parameter that the new file never makes itself: a
    renamed parameter may have another type (ScheduleBatch -> ModelWorkerBatch)."""
    if not renamed:
        return []
    seen = {
        ast.unparse(n)
        for n in ast.walk(target.tree)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
    }
    call = _call_of(ast.parse(text).body[0])
    out = []
    for arg in list(call.args) + [k.value for k in call.keywords]:
        for node in ast.walk(arg):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in renamed
                and ast.unparse(node) not in seen
            ):
                out.append(ast.unparse(node))
    return out


def _probe(target: Target, function: str, probe: Probe) -> tuple[list[Site], str]:
    in_fn = [s for s in target.sites if s.function == function]
    for how, pick in (
        ("same statement", lambda s: s.key == probe.key),
        ("same shape", lambda s: bool(probe.shape) and s.shape == probe.shape),
        ("same call", lambda s: bool(probe.callname) and s.callname == probe.callname),
        ("same targets and method", lambda s: bool(probe.tail) and s.tail == probe.tail),
    ):
        found = [s for s in in_fn if pick(s)]
        if len(found) <= 1:
            if found:
                return found, how
            continue
        narrowed = [s for s in found if s.where == probe.parent]
        if len(narrowed) == 1:
            return narrowed, how + ", same enclosing block"
        if how == "same statement" and len(found) == probe.equals:
            # As many equal statements as in the reference: take the one in the same position.
            return [found[probe.ordinal]], how + f", occurrence {probe.ordinal + 1} of {len(found)}"
        return found, how
    return [], "no statement with that text, shape or call"


def _group_problem(items: list[Placement], targets: dict[str, Target], aliases) -> str:
    lines = [p.line for p in sorted(items, key=lambda p: p.order)]
    if lines != sorted(lines):
        return "its lines would be out of the reference's order here"
    ref = next((p.anchor.span for p in items if isinstance(p.anchor, Anchor) and p.anchor.span), frozenset())
    if not ref or len(items) < 2:
        return ""
    target = targets[items[0].path]
    fn = target.resolve_function(_anchor(items[0]).function, aliases)
    here = _called_names(_span_sites(target.sites, fn, min(lines) + 1, max(lines)))
    kept = {r for r in ref if r in here or any(_similar(r, h) for h in here)}
    if len(kept) < SPAN_MIN_KEPT * len(ref) or len(kept) < SPAN_MIN_SHARE * len(here):
        return (
            f"what it would cover here differs from the reference: calls "
            f"{sorted(ref - kept)[:4]} missing, {sorted(here - ref)[:4]} added"
        )
    return ""


def _similar(a: str, b: str) -> bool:
    import difflib

    return difflib.SequenceMatcher(None, a, b).ratio() >= 0.8


def _choose_spots(items: list[Placement], targets, aliases) -> str:
    import itertools

    problem = _group_problem(items, targets, aliases)
    if not problem or not any(p.alternatives for p in items):
        return problem
    first = [(p.line, p.text, p.how) for p in items]
    options = [[(p.line, p.text, p.how)] + p.alternatives[:2] for p in items]
    for combo in itertools.islice(itertools.product(*options), 1, 64):
        for p, (line, text, how) in zip(items, combo):
            p.line, p.text, p.how = line, text, how
        if not _group_problem(items, targets, aliases):
            for p, choice, was in zip(items, combo, first):
                if choice != was:
                    p.how += " [second choice: the first failed the phase's order/coverage check]"
            return ""
    for p, (line, text, how) in zip(items, first):
        p.line, p.text, p.how = line, text, how
    return problem


def _spots(target: Target, function: str, anchor: Anchor) -> tuple[list[tuple[int, str, str]], str]:
    """Every place the anchor's probes find, best first: [(line, indentation, how)], and why
    the other probes found none."""
    spots: list[tuple[int, str, str]] = []
    reasons = []

    def add(stmt, side, how):
        line, indent = target.insertion(stmt, side)
        if all(line != s[0] for s in spots):
            spots.append((line, indent, how))

    for probe in anchor.probes:
        found, how = _probe(target, function, probe)
        if (
            len(found) == 1
            and probe.side == "after"
            and isinstance(found[0].stmt, (ast.Return, ast.Raise, ast.Continue, ast.Break))
        ):
            reasons.append(f"after `{_short(found[0].stmt)}`: would never run")
        elif len(found) == 1:
            add(found[0].stmt, probe.side, f"{how} ({probe.side} `{_short(found[0].stmt)}` in {function})")
        else:
            reasons.append(
                f"{probe.side} `{probe.key[:50]}`: " + (how if not found else f"{len(found)} candidates")
            )
    if anchor.last_in == FUNCTION_END:
        body = [s for s in target.sites if s.function == function and s.parent == ""]
        if body and not isinstance(body[-1].stmt, (ast.Return, ast.Raise)):
            add(body[-1].stmt, "after", f"end of {function}")
        else:
            reasons.append(f"{function} ends in a return")
    if anchor.first_in == FUNCTION_START:
        body = [s for s in target.sites if s.function == function and s.parent == ""]
        body = [s for s in body if not (s.index == 0 and _is_docstring(s.stmt))]
        if body:
            add(body[0].stmt, "before", f"first statement of {function}")
        else:
            reasons.append(f"{function} has no body")
    elif anchor.first_in:
        blocks = [
            s for s in target.sites if s.function == function and s.where == anchor.first_in and s.index == 0
        ]
        if len(blocks) == 1:
            add(blocks[0].stmt, "before", f"first in the block `{anchor.first_in[:50]}` ({function})")
        else:
            reasons.append(f"first in `{anchor.first_in[:50]}`: {len(blocks)} such blocks")
    return spots, "; ".join(reasons) or "no anchor"


def place(
    anchors: list[Anchor],
    targets: dict[str, Target],
    file_map: dict[str, str],
    aliases: dict[str, str] | None = None,
    hand: list[HandRule] | None = None,
    skip_groups: set[str] | None = None,
    skip_identities: set[str] | None = None,
    renames: dict[str, str] | None = None,
    prefer=None,
) -> Result:
    """Placements of ``anchors`` into ``targets`` (new path -> Target).

    ``file_map``: reference path -> new path (a function not found there is looked up by name in
    the other targets). ``aliases``: reference qualified name -> new qualified name.
    ``skip_groups``: groups a person decided are absent in this release (placed by nobody).
    ``renames``: text replacements a person decided for this release's lines (an attribute
    renamed upstream); a line they change is reported as adjusted by hand.
    ``prefer``: ``(anchor, spots) -> spots`` reorders the places the probes found (first wins).
    """
    aliases = aliases or {}
    skip_groups = skip_groups or set()
    skip_identities = skip_identities or set()
    result = Result()
    pending: dict[str, list[Placement]] = {}
    failed: dict[str, str] = {}
    for order, a in enumerate(anchors):
        if a.call == "import" or a.group in skip_groups or skip_identities & set(a.identity):
            continue
        home = file_map.get(a.path, a.path)
        search = [home] + [p for p in targets if p != home]
        placed, why = _place_anchor(a, order, search, targets, aliases, renames, prefer, result.skipped)
        if why == "not applicable":
            continue
        if placed is None:
            failed.setdefault(a.group, why)
            result.missing.append((a, why))
        else:
            pending.setdefault(a.group, []).append(placed)
    _fail_shared_lines(pending, failed)
    # Each phase must keep the reference's order (begin before end) and still cover what it
    # covered there; when the first choice of spots fails, the other spots the probes found
    # are tried (a few combinations at most).
    for group, items in pending.items():
        if group in failed:
            continue
        problem = _choose_spots(items, targets, aliases)
        if problem:
            failed[group] = problem
    for group, items in pending.items():
        if group in failed:
            for p in items:
                result.missing.append(
                    (_anchor(p), f"its phase's other lines were not placed ({failed[group]})")
                )
            continue
        result.placements += items
    for n, rule in enumerate(hand or []):
        result.placements.append(_place_hand(rule, targets, len(anchors) + n))
    return result


def _place_anchor(
    a: Anchor,
    order: int,
    search: list[str],
    targets: dict[str, Target],
    aliases: dict[str, str],
    renames: dict[str, str] | None,
    prefer,
    skipped: list,
) -> tuple[Placement | None, str]:
    """One anchor placed in the first target (of ``search``) that has its function: the
    placement (None where it found no spot, or the line uses what this release lacks) and why
    not; "not applicable" (and a row in ``skipped``) where the reference's branch is gone."""
    placed = None
    why = f"function {a.function} not found"
    for path in search:
        target = targets.get(path)
        if target is None:
            continue
        fn = target.resolve_function(a.function, aliases)
        if fn is None:
            continue
        spots, how = _spots(target, fn, a)
        if prefer is not None and len(spots) > 1:
            spots = prefer(a, spots)
        spot = spots[0][:2] if spots else None
        if spots:
            how = spots[0][2]
        text, how, renamed = _line_for(a, target, fn, how, renames)
        unknown = unknown_references(text, target, fn) + _unproven_uses(text, renamed, target)
        if spot is not None and unknown:
            why = f"in {fn}: the line uses {', '.join(unknown)}, which this release does not have"
        elif spot is not None:
            placed = Placement(
                path,
                spot[0],
                order,
                spot[1] + text + "\n",
                a.patch,
                "tool: " + how,
                a.group,
                a,
                [(ln, ind + text + "\n", "tool: " + h) for ln, ind, h in spots[1:]],
            )
        else:
            why = f"in {fn}: {how}"
            if _branch_gone(a, target, fn):
                why = "not applicable"
                skipped.append(
                    (a, f"the reference's `return` in `{a.probes[0].parent}` has no counterpart in {fn}")
                )
        break
    return placed, why


def _line_for(
    a: Anchor, target: Target, fn: str, how: str, renames: dict[str, str] | None
) -> tuple[str, str, list[str]]:
    """The anchor's line for ``fn`` in this release: its parameters renamed as the function's
    are, then a person's renames; ``how`` with what changed, and the renamed parameters."""
    text = rename_params(a.text, a.params, target.params(fn))
    renamed = []
    if text != a.text:
        how += f" [parameters renamed: `{text}`]"
        renamed = [n for o, n in zip(a.params, target.params(fn)) if o != n]
    for old, new in (renames or {}).items():
        if old in text:
            text = text.replace(old, new)
            how += f" [hand: `{old}` -> `{new}`]"
    return text, how, renamed


def _fail_shared_lines(pending: dict[str, list[Placement]], failed: dict[str, str]) -> None:
    """Two lines that sat at different spots of the reference must not land on one spot here:
    that means two different statements of the reference matched one of this release; their
    groups fail."""
    by_line: dict[tuple[str, int], set[str]] = {}
    for items in pending.values():
        for p in items:
            by_line.setdefault((p.path, p.line), set()).add(_anchor(p).spot)
    for items in pending.values():
        for p in items:
            if len(by_line[(p.path, p.line)]) > 1 and p.group not in failed:
                failed[p.group] = (
                    f"line {p.line + 1} of {p.path.rsplit('/', 1)[-1]} was matched "
                    "for two different reference spots"
                )


def _short(stmt: ast.stmt) -> str:
    text = _header(stmt).splitlines()[0]
    return text if len(text) <= 50 else text[:47] + "..."


def _place_hand(rule: HandRule, targets: dict[str, Target], order: int) -> Placement:
    target = targets.get(rule.path)
    if target is None:
        raise InvalidInput(f"hand rule for {rule.path}: not a file of this release")
    found = [
        s for s in target.sites if s.function == rule.function and ast.unparse(s.stmt).startswith(rule.anchor)
    ]
    if rule.nth is not None and len(found) > rule.nth:
        found = [found[rule.nth]]
    if len(found) != 1:
        raise InvalidInput(
            f"hand rule {rule.text!r} in {rule.function}: {len(found)} statements "
            f"start with {rule.anchor!r} (need exactly one, or nth)"
        )
    unknown = unknown_references(rule.text, target, rule.function)
    if unknown:
        raise InvalidInput(
            f"hand rule {rule.text!r} in {rule.function}: uses {', '.join(unknown)}, "
            "which this release does not have"
        )
    line, indent = target.insertion(found[0].stmt, rule.side)
    return Placement(
        rule.path,
        line,
        order,
        indent + rule.text + "\n",
        rule.patch,
        f"hand: {rule.why}" if rule.why else "hand",
        f"hand:{rule.function}",
        rule,
    )


def add_imports(import_text: str, result: Result, targets: dict[str, Target]) -> None:
    """One timer import per file that gets a timer line, in the first patch touching it."""
    by_path: dict[str, list[Placement]] = {}
    for p in result.placements:
        by_path.setdefault(p.path, []).append(p)
    for path, items in by_path.items():
        anchor = _top_import_anchor(targets[path].tree)
        if anchor is None:
            raise InvalidInput(f"{path}: no module-level import to put the timer import after")
        line, indent = targets[path].insertion(anchor, "after")
        result.placements.append(
            Placement(
                path,
                line,
                -1,
                indent + import_text + "\n",
                min(p.patch for p in items),
                "tool: after the last module-level import",
                f"{path}:import",
            )
        )


_RANK = {"end": 0, "note": 1, "cycle_end": 2, "cycle_begin": 3, "begin": 4}


def _rank(text: str) -> int:
    """Lines inserted at one spot: what closes comes before what opens (inner phases close
    first, the cycle opens before its phases), so phases nest whoever placed them."""
    call = text.strip().split("(", 1)[0].rsplit(".", 1)[-1]
    return _RANK.get(call, -1)


def render_states(
    pristine: dict[str, str], placements: list[Placement], patch_names: list[str]
) -> list[dict[str, str]]:
    """states[k]: the files with the lines of the first k patches inserted."""
    states = [dict(pristine)]
    for k in range(1, len(patch_names) + 1):
        keep = set(patch_names[:k])
        out = {}
        for path, text in pristine.items():
            lines = text.splitlines(keepends=True)
            mine = sorted(
                (p for p in placements if p.path == path and p.patch in keep),
                key=lambda p: (p.line, _rank(p.text), p.order),
            )
            pieces, cursor = [], 0
            for p in mine:
                pieces += lines[cursor : p.line] + [p.text]
                cursor = p.line
            pieces += lines[cursor:]
            out[path] = "".join(pieces)
        states.append(out)
    return states


def patch_texts(states: list[dict[str, str]], headers: list[str]) -> list[str]:
    """One patch per consecutive pair of states, each behind its header."""
    texts = []
    for k, header in enumerate(headers, 1):
        body = diff_states(states[k - 1], states[k])
        texts.append(header + body if body else "")
    return texts


__all__ = [
    "Anchor",
    "HandRule",
    "Placement",
    "Result",
    "Target",
    "apply_patch",
    "is_timer_stmt",
    "learn",
    "patch_texts",
    "place",
    "render_states",
    "split_header",
    "timer_kind",
]
