"""A proof without a GPU that a series' timer lines pair up and run: the static proof.

    python -m patchkit.author.phaseproof sglang-v0.5.17 [...]   # or --all; exit 1 on a finding

The series is applied, at its exact line numbers, to its release's files read from the pinned
wheel (``upstream.fetch_wheel``: sha256 checked). Then, over the patched files' AST:

1. **Balance, on every path.** Each function is walked statement by statement with the set of
   timer stacks it can hold there (a stack: the phases open, innermost last; ``cycle`` for an
   open cycle). ``begin`` pushes, ``end`` must close the innermost open phase, ``cycle_begin``
   needs an empty stack (the runtime abandons whatever is open at a cycle's start) and
   ``cycle_end`` must find the cycle innermost. Every ``return`` and the function's end must
   leave the stack as it was at the function's start: empty. Walked: both branches of every
   ``if``, every ``match`` case, a loop run zero or more times (each run must leave the stack
   as it found it), ``break``/``continue``, ``with`` bodies, and ``try``: its handlers start
   from any state the ``try`` body passes through, its ``else`` from the body's end, and its
   ``finally`` runs on every way out, a ``return`` inside included. Conditions are not
   evaluated: two ``if``\\ s on one condition count as four paths.
   *Exceptions* end a path unchecked: a ``raise`` (or any call that raises) leaves the phases
   it interrupts open, and the runtime drops them, and the cycle, at the next ``cycle_begin``
   (nothing half-timed is written). A handler that catches and carries on is checked as above.
2. **Nesting across calls.** A call made while phases are open (open in the caller, or in a
   caller of the caller on the way from the entry) must not reach a function that begins a
   cycle, or begins a phase already open.
3. **Reached from the entry.** Every function holding a timer line is reached from the
   worker's entry, ``forward_batch_generation`` (``forward_batch_speculative_generation``
   before 0.5.3) of ``EAGLEWorker`` / ``EAGLEWorkerV2``, whichever the patched files define,
   through calls of the release's own code: ``self.m()`` (by the receiver's class, its bases
   in order), ``self.attr.m()`` where ``attr`` holds an instance of a class the code builds
   (``self.attr = Cls(...)``, also as one side of ``x if c else y``, or a property returning
   ``self.other``, such as BaseSpecWorker's ``draft_worker``), a module function or class
   (``run_eagle_verify(...)``, ``Cls(...)``) defined in or imported from a module of the
   worker files' package (``sglang.srt.speculative``: unpatched ones, such as the base
   classes, read from the same wheel). Not followed: calls through local variables,
   arguments, containers or callbacks, and dynamic dispatch beyond ``self``; so a function
   only such a call reaches is reported, never wrongly passed.

The timer lines are statements calling ``_pt.<function>(...)`` (patchkit/timing/phase_timer.py);
any other use of ``_pt`` is a finding (a form the proof does not read).
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from patchkit import upstream
from patchkit.author import authoring
from patchkit.author.timerplace import TIMER_ALIAS, is_timer_stmt, timer_kind
from patchkit.boundary import main_boundary
from patchkit.errors import InvalidInput
from patchkit.locations import series_root

# Bumped whenever what the proof checks changes: patches/proofs.toml records, per series, the
# version that proved it (tests/series/test_proofs.py holds the two equal).
CHECKER_VERSION = 1

WORKER_CLASSES = ("EAGLEWorker", "EAGLEWorkerV2")
ENTRY_METHODS = ("forward_batch_generation", "forward_batch_speculative_generation")
CYCLE = "cycle"
MAX_NESTING = 16  # stacks deeper than this on entry (recursion) are not followed further

State = tuple[str, ...]
Function = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True, order=True)
class Finding:
    path: str
    line: int
    function: str
    message: str

    def __str__(self) -> str:
        return f"{Path(self.path).name}:{self.line} {self.function}: {self.message}"


@dataclass
class Proof:
    series: str
    version: str
    entries: list[str] = field(default_factory=list)
    reached: dict[str, str] = field(default_factory=dict)  # timed function -> the call chain
    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.findings

    def to_json(self) -> dict:
        return {
            "series": self.series,
            "version": self.version,
            "checker": CHECKER_VERSION,
            "ok": self.ok,
            "entries": self.entries,
            "reached": self.reached,
            "findings": [str(f) for f in self.findings],
        }


# ----------------------------------------------------------------------------- the release's files


@cache
def _wheel(name: str, version: str) -> tuple[Path, frozenset[str]]:
    wheel = upstream.fetch_wheel(name, version)
    with zipfile.ZipFile(wheel.path) as zf:
        return wheel.path, frozenset(zf.namelist())


@cache
def _wheel_text(name: str, version: str, path: str) -> str | None:
    """A file of the release's wheel (``sglang/...``) as text; None where the wheel lacks it."""
    wheel, names = _wheel(name, version)
    if path not in names:
        return None
    return upstream.read_wheel_files(wheel, [path])[path].decode("utf-8")


def patched_files(series_dir: Path) -> tuple[str, str, dict[str, str]]:
    """(package name, version, wheel path -> patched text) of a series applied to its pinned
    release's files, every patch at its exact lines (``authoring.apply_patch``)."""
    series_dir = Path(series_dir)
    pin = upstream.read_pin(series_dir / "pin.toml")
    if pin.version is None:
        raise InvalidInput(f"{series_dir}: its pin.toml names no version, so no wheel to prove it on")
    prefix = pin.package_prefix or ""
    files: dict[str, str] = {}
    for entry in pin.files.values():
        text = _wheel_text(pin.name, pin.version, upstream.installed_path(entry.path, prefix))
        if text is None or upstream.sha256_bytes(text.encode()) != entry.sha256:
            raise InvalidInput(
                f"{series_dir}: {entry.path} of {pin.name} {pin.version} is not the pinned text"
            )
        files[entry.path] = text
    pinned = list(files)
    for name in authoring.read_series_names(series_dir):
        files = authoring.apply_patch(files, authoring.read_patch(series_dir, name), str(series_dir / name))
    # the files the series creates (the runtime) are not upstream's code
    return pin.name, pin.version, {upstream.installed_path(p, prefix): files[p] for p in pinned}


# ----------------------------------------------------------------------------- 1. balance on every path


def _timer_call(stmt: ast.stmt) -> tuple[str, str] | None:
    if isinstance(stmt, ast.Expr) and is_timer_stmt(stmt):
        return timer_kind(stmt)
    return None


@dataclass
class _Flow:
    normal: set[State] = field(default_factory=set)
    returns: list[tuple[State, int]] = field(default_factory=list)
    breaks: set[State] = field(default_factory=set)
    continues: set[State] = field(default_factory=set)

    def add_exits(self, other: _Flow) -> None:
        self.returns += other.returns
        self.breaks |= other.breaks
        self.continues |= other.continues


class _PathWalk:
    """The timer stacks one function can hold before each of its statements (``at``), and the
    findings on its paths."""

    def __init__(self, path: str, fn: Function, qualname: str):
        self.path, self.fn, self.qualname = path, fn, qualname
        self.findings: set[Finding] = set()
        self.at: dict[int, set[State]] = {}  # id(statement) -> stacks before it

    def run(self) -> None:
        flow = self.block(self.fn.body, {()}, set())
        exits = [*flow.returns, *((s, self.fn.end_lineno or self.fn.lineno) for s in flow.normal)]
        for state, line in exits:
            if state:
                where = "the function's end" if (state, line) not in flow.returns else f"return (line {line})"
                self.report(line, f"{where} leaves {_names(state)} open")

    def report(self, line: int, message: str) -> None:
        self.findings.add(Finding(self.path, line, self.qualname, message))

    def block(self, stmts: list[ast.stmt], states: set[State], seen: set[State]) -> _Flow:
        flow = _Flow()
        current = set(states)
        for stmt in stmts:
            if not current:
                break  # the rest never runs (the series tests refuse timer lines there)
            self.at.setdefault(id(stmt), set()).update(current)
            seen |= current
            step = self.stmt(stmt, current, seen)
            flow.add_exits(step)
            current = step.normal
        flow.normal = current
        return flow

    def stmt(self, stmt: ast.stmt, states: set[State], seen: set[State]) -> _Flow:
        call = _timer_call(stmt)
        if call is not None:
            return _Flow(normal={self.timer(stmt.lineno, *call, s) for s in states})
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return _Flow(normal=states)  # a definition runs nothing here (walked on its own)
        if isinstance(stmt, ast.Return):
            return _Flow(returns=[(s, stmt.lineno) for s in states])
        if isinstance(stmt, ast.Raise):
            return _Flow()  # an exception: the path ends unchecked (module docstring)
        if isinstance(stmt, ast.Break):
            return _Flow(breaks=set(states))
        if isinstance(stmt, ast.Continue):
            return _Flow(continues=set(states))
        if isinstance(stmt, ast.If):
            a, b = self.block(stmt.body, states, seen), self.block(stmt.orelse, states, seen)
            flow = _Flow(normal=a.normal | b.normal)
            flow.add_exits(a)
            flow.add_exits(b)
            return flow
        if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
            return self.loop(stmt, states, seen)
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            return self.block(stmt.body, states, seen)
        if isinstance(stmt, ast.Match):
            flow = _Flow(normal=set(states))  # no case may match
            for case in stmt.cases:
                sub = self.block(case.body, states, seen)
                flow.normal |= sub.normal
                flow.add_exits(sub)
            return flow
        if isinstance(stmt, (ast.Try, ast.TryStar)):
            return self.try_(stmt, states, seen)
        return _Flow(normal=states)

    def loop(self, stmt: ast.For | ast.AsyncFor | ast.While, states: set[State], seen: set[State]) -> _Flow:
        """The body runs zero or more times, and each run must leave the stack as it found it;
        after the loop: the stacks of no run, of a ``break``, and of a run that did not."""
        flow = _Flow()
        after = set(states)
        for state in sorted(states):
            run = self.block(stmt.body, {state}, seen)
            flow.returns += run.returns
            flow.breaks |= run.breaks
            for changed in sorted((run.normal | run.continues) - {state}):
                if changed[: len(state)] == state:
                    what = f"begins {_names(changed[len(state) :])} and does not end it"
                else:
                    what = f"ends {_names(state)} it did not begin"
                self.report(stmt.lineno, f"an iteration of this loop {what}")
                after.add(changed)
        forever = (
            isinstance(stmt, ast.While) and isinstance(stmt.test, ast.Constant) and bool(stmt.test.value)
        )
        orelse = self.block(stmt.orelse, set() if forever else after, seen)
        out = _Flow(normal=orelse.normal | flow.breaks, returns=flow.returns + orelse.returns)
        out.breaks, out.continues = orelse.breaks, orelse.continues
        return out

    def try_(self, stmt: ast.Try | ast.TryStar, states: set[State], seen: set[State]) -> _Flow:
        inside: set[State] = set(states)
        body = self.block(stmt.body, states, inside)
        seen |= inside
        flow = _Flow()
        flow.add_exits(body)
        orelse = self.block(stmt.orelse, body.normal, seen)
        flow.add_exits(orelse)
        flow.normal = set(orelse.normal)
        for handler in stmt.handlers:  # an exception anywhere in the body lands here
            sub = self.block(handler.body, inside, seen)
            flow.normal |= sub.normal
            flow.add_exits(sub)
        if not stmt.finalbody:
            return flow
        out = _Flow()

        def through(group: Iterable[State]) -> _Flow:
            sub = self.block(stmt.finalbody, set(group), seen)
            out.returns += sub.returns  # a return in the finally block wins
            return sub

        out.normal = through(flow.normal).normal
        for state, line in flow.returns:
            out.returns += [(s, line) for s in through([state]).normal]
        out.breaks = through(flow.breaks).normal
        out.continues = through(flow.continues).normal
        return out

    def timer(self, line: int, call: str, label: str, state: State) -> State:
        """The stack after one timer call; a finding where the call does not fit the stack (the
        stack then continues as the runtime would leave it)."""
        if call == "begin":
            if label in state:
                self.report(line, f"begin({label!r}) while {label!r} is already open")
            return state + (label,)
        if call == "end":
            if state and state[-1] == label:
                return state[:-1]
            if label in state:
                inner = state[state.index(label) + 1 :]
                self.report(line, f"end({label!r}) while {_names(inner)} begun inside it is still open")
                return state[: state.index(label)]
            self.report(line, f"end({label!r}) where no {label!r} is open on this path")
            return state
        if call == "cycle_begin":
            if state:
                self.report(line, f"cycle_begin() while {_names(state)} is open (the runtime drops it)")
            return (CYCLE,)
        if call == "cycle_end":
            if state and state[-1] == CYCLE:
                return state[:-1]
            if CYCLE in state:
                inner = state[state.index(CYCLE) + 1 :]
                self.report(line, f"cycle_end() while {_names(inner)} is still open")
                return state[: state.index(CYCLE)]
            self.report(line, "cycle_end() where no cycle is open on this path")
            return state
        if call in ("note", "import"):
            return state
        self.report(line, f"_pt.{call}(): a timer call the proof does not know")
        return state


def _names(state: State) -> str:
    return ", ".join(repr(n) for n in state)


# ----------------------------------------------------------------------------- the code: modules, classes


@dataclass(frozen=True)
class _FunctionRef:
    module: str
    qualname: str  # "Class.method" or "function"

    def __str__(self) -> str:
        return self.qualname


class _Module:
    def __init__(self, name: str, path: str, text: str):
        self.name, self.path = name, path
        self.tree = ast.parse(text, path)
        self.imports: dict[str, tuple[str, str]] = {}  # local name -> (module, name)
        self.functions: dict[str, Function] = {}
        self.classes: dict[str, ast.ClassDef] = {}
        for node in self.tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions[node.name] = node
            elif isinstance(node, ast.ClassDef):
                self.classes[node.name] = node
        for imp in ast.walk(self.tree):  # imports under if/try at module level too
            if isinstance(imp, ast.ImportFrom):
                base = imp.module or ""
                if imp.level:
                    base = ".".join(name.split(".")[: -imp.level] + ([base] if base else []))
                for alias in imp.names:
                    self.imports.setdefault(alias.asname or alias.name, (base, alias.name))
        self.everything = dict(_functions(self.tree))  # qualified name -> function, nested too

    def methods(self, cls: str) -> dict[str, Function]:
        return {
            n.name: n
            for n in self.classes[cls].body
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
        }


@dataclass(frozen=True)
class _Class:
    module: str
    name: str


class _Code:
    """The patched files and, read on demand from the same wheel, the unpatched modules of
    their package that they import (base classes, the classes they build)."""

    def __init__(self, name: str, version: str, patched: dict[str, str]):
        self.dist, self.version = name, version
        self.modules: dict[str, _Module | None] = {}
        self.packages = {_module_name(p).rsplit(".", 1)[0] for p in patched}
        for path, text in patched.items():
            self.modules[_module_name(path)] = _Module(_module_name(path), path, text)

    def module(self, name: str) -> _Module | None:
        if name not in self.modules:
            inside = name.rsplit(".", 1)[0] in self.packages
            self.modules[name] = _unpatched(self.dist, self.version, name) if inside else None
        return self.modules[name]

    def lookup(self, module: _Module, name: str) -> _Class | _FunctionRef | None:
        """What a module-level name means: a class or function defined or imported there."""
        seen = set()
        while (module.name, name) not in seen:
            seen.add((module.name, name))
            if name in module.classes:
                return _Class(module.name, name)
            if name in module.functions:
                return _FunctionRef(module.name, name)
            if name not in module.imports:
                return None
            source, real = module.imports[name]
            found = self.module(source)
            if found is None:
                return None
            module, name = found, real
        return None

    def mro(self, cls: _Class) -> list[_Class]:
        out: list[_Class] = []

        def visit(c: _Class) -> None:
            if c in out:
                return
            out.append(c)
            mod = self.module(c.module)
            assert mod is not None
            for base in mod.classes[c.name].bases:
                if isinstance(base, ast.Name):
                    found = self.lookup(mod, base.id)
                    if isinstance(found, _Class):
                        visit(found)

        visit(cls)
        return out

    def method(self, cls: _Class, name: str) -> tuple[_FunctionRef, Function] | None:
        for c in self.mro(cls):
            mod = self.module(c.module)
            assert mod is not None
            found = mod.methods(c.name).get(name)
            if found is not None:
                return _FunctionRef(c.module, f"{c.name}.{name}"), found
        return None

    @cache  # noqa: B019  (one _Code per proof; the cache goes with it)
    def attribute_types(self, cls: _Class) -> dict[str, frozenset[_Class]]:
        """``self.attr`` -> the classes it may hold: ``self.attr = Cls(...)`` in any method of
        the class or its bases, and a property returning ``self.other``."""
        built: dict[str, set[_Class]] = {}
        returned: dict[str, str] = {}
        for c in self.mro(cls):
            mod = self.module(c.module)
            assert mod is not None
            for fn in mod.methods(c.name).values():
                if any(isinstance(d, ast.Name) and d.id == "property" for d in fn.decorator_list):
                    ret = next((n for n in ast.walk(fn) if isinstance(n, ast.Return)), None)
                    if ret is not None and _self_attr(ret.value):
                        returned.setdefault(fn.name, _self_attr(ret.value) or "")
                for node in ast.walk(fn):
                    target, value = _assigned(node)
                    name = _self_attr(target)
                    for made in _built(value) if name else ():
                        found = self.lookup(mod, made)
                        if isinstance(found, _Class):
                            built.setdefault(name or "", set()).add(found)
        out = {k: frozenset(v) for k, v in built.items()}
        for prop, attr in returned.items():
            out.setdefault(prop, out.get(attr, frozenset()))
        return out


@cache
def _unpatched(dist: str, version: str, name: str) -> _Module | None:
    """A module of the release read from its wheel as it is (parsed once per process)."""
    path = name.replace(".", "/") + ".py"
    text = _wheel_text(dist, version, path)
    return None if text is None else _Module(name, path, text)


def _module_name(path: str) -> str:
    return path.removesuffix(".py").replace("/", ".")


def _self_attr(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


def _built(value: ast.AST | None) -> list[str]:
    """The names called in ``value`` that may make its result: ``Cls(...)``, either side of
    ``Cls(...) if c else None`` or of ``a or Cls(...)``."""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
        return [value.func.id]
    if isinstance(value, ast.IfExp):
        return _built(value.body) + _built(value.orelse)
    if isinstance(value, ast.BoolOp):
        return [n for v in value.values for n in _built(v)]
    return []


def _assigned(node: ast.AST) -> tuple[ast.AST | None, ast.AST | None]:
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        return node.targets[0], node.value
    if isinstance(node, ast.AnnAssign):
        return node.target, node.value
    return None, None


# ----------------------------------------------------------------------------- 3. reached from the entry


@dataclass(frozen=True)
class _Node:
    ref: _FunctionRef
    receiver: _Class | None  # the class ``self`` is an instance of


def _callees(code: _Code, node: _Node, fn: Function) -> list[tuple[ast.Call, _Node]]:
    """The calls in ``fn`` (run with ``self`` an instance of ``node.receiver``) the proof can
    follow, each with the function it reaches."""
    module = code.module(node.ref.module)
    assert module is not None
    out = []
    for call in ast.walk(fn):
        if not isinstance(call, ast.Call):
            continue
        func = call.func
        targets: list[tuple[_Class | None, _FunctionRef]] = []
        if isinstance(func, ast.Name):
            found = code.lookup(module, func.id)
            if isinstance(found, _FunctionRef):
                targets.append((None, found))
            elif isinstance(found, _Class):
                init = code.method(found, "__init__")
                if init is not None:
                    targets.append((found, init[0]))
        elif isinstance(func, ast.Attribute) and node.receiver is not None:
            if _self_attr(func) is not None:
                receivers = {node.receiver}
            elif (attr := _self_attr(func.value)) is not None:
                receivers = set(code.attribute_types(node.receiver).get(attr, ()))
            else:
                receivers = set()
            for cls in receivers:
                found_method = code.method(cls, func.attr)
                if found_method is not None:
                    targets.append((cls, found_method[0]))
        out += [(call, _Node(ref, receiver)) for receiver, ref in targets]
    return out


# ----------------------------------------------------------------------------- the proof


def _functions(tree: ast.Module) -> list[tuple[str, Function]]:
    """(qualified name, function) of every function and method, nested ones included."""
    out: list[tuple[str, Function]] = []

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append((prefix + node.name, node))
                visit(node.body, prefix + node.name + ".")
            elif isinstance(node, ast.ClassDef):
                visit(node.body, prefix + node.name + ".")
            else:
                for sub in ast.iter_child_nodes(node):
                    if isinstance(sub, ast.stmt):
                        visit([sub], prefix)

    visit(tree.body, "")
    return out


def _own_statements(fn: Function) -> list[ast.stmt]:
    """The statements of ``fn``, not of the functions and classes defined in it."""
    out: list[ast.stmt] = []
    stack: list[ast.AST] = list(fn.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.stmt):
            out.append(node)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            stack += [
                c
                for c in ast.iter_child_nodes(node)
                if isinstance(c, (ast.stmt, ast.match_case, ast.excepthandler))
            ]
    return out


def _stray_uses(module: _Module) -> list[Finding]:
    """``_pt`` used other than as a timer statement (a with-block, an argument...)."""
    timer_calls = {
        id(n.value.func.value)
        for n in ast.walk(module.tree)
        if isinstance(n, ast.Expr)
        and is_timer_stmt(n)
        and isinstance(n.value, ast.Call)
        and isinstance(n.value.func, ast.Attribute)
    }
    return [
        Finding(
            module.path, n.lineno, "", f"`{ast.unparse(n)}`: a use of {TIMER_ALIAS} the proof does not read"
        )
        for n in ast.walk(module.tree)
        if isinstance(n, ast.Name) and n.id == TIMER_ALIAS and id(n) not in timer_calls
    ]


Timed = dict[_FunctionRef, set[tuple[str, str]]]  # function -> its (timer call, phase)s


def prove_files(series: str, name: str, version: str, patched: dict[str, str]) -> Proof:
    """The proof over one release's patched files (wheel path -> text)."""
    proof = Proof(series, version)
    code = _Code(name, version, patched)
    walks: dict[_FunctionRef, _PathWalk] = {}
    timed: Timed = {}
    for path in sorted(patched):
        module = code.modules[_module_name(path)]
        assert module is not None
        proof.findings += _stray_uses(module)
        for qualname, fn in module.everything.items():
            calls = {c for c in map(_timer_call, _own_statements(fn)) if c is not None and c[0] != "import"}
            if calls:
                ref = _FunctionRef(module.name, qualname)
                walks[ref] = _PathWalk(path, fn, qualname)
                walks[ref].run()
                timed[ref] = calls
                proof.findings += walks[ref].findings
    entries = _entries(proof, code, patched)
    chain = _follow_calls(proof, code, entries, walks, timed)
    reached = {n.ref: n for n in chain}
    for ref, walk in walks.items():
        if ref in reached:
            proof.reached[ref.qualname] = " -> ".join(str(n.ref) for n in _path_to(chain, reached[ref]))
        else:
            entry = " or ".join(proof.entries) or "any entry"
            message = f"holds timer lines but is not reached from {entry}"
            proof.findings.append(Finding(walk.path, walk.fn.lineno, ref.qualname, message))
    proof.findings = sorted(set(proof.findings))
    return proof


def _entries(proof: Proof, code: _Code, patched: dict[str, str]) -> list[_Node]:
    """The entry method of each worker class the patched files define."""
    entries = []
    for path in sorted(patched):
        module = code.modules[_module_name(path)]
        assert module is not None
        for cls in (_Class(module.name, c) for c in WORKER_CLASSES if c in module.classes):
            found = [m for m in (code.method(cls, name) for name in ENTRY_METHODS) if m is not None]
            if not found:
                where = module.classes[cls.name].lineno
                message = f"no {' / '.join(ENTRY_METHODS)}: no entry to reach from"
                proof.findings.append(Finding(module.path, where, cls.name, message))
                continue
            entries.append(_Node(found[0][0], cls))
            proof.entries.append(f"{cls.name}.{found[0][0].qualname.split('.')[-1]}")
    if not entries:
        message = f"none of {', '.join(WORKER_CLASSES)} in the patched files"
        proof.findings.append(Finding(proof.series, 0, "", message))
    return entries


def _follow_calls(
    proof: Proof, code: _Code, entries: list[_Node], walks: dict[_FunctionRef, _PathWalk], timed: Timed
) -> dict[_Node, _Node | None]:
    """From the entries along every call the proof follows, to a fixed point: which stacks each
    function is entered with (the caller's on entry plus its own at the call), checked against
    what the callee begins (``_nesting``). Returns each reached function's first caller."""
    chain: dict[_Node, _Node | None] = {e: None for e in entries}
    entered: dict[_Node, set[State]] = {e: {()} for e in entries}
    queue = list(entries)
    while queue:
        node = queue.pop(0)
        fn = _function_of(code, node.ref)
        walk = walks.get(node.ref)
        for call, callee in _callees(code, node, fn):
            at_call: set[State] = {()}
            if walk is not None:
                stmt = _statement_of(fn, call)
                at_call = walk.at.get(id(stmt), set()) if stmt is not None else set()
            arriving = {outer + inner for outer in entered[node] for inner in at_call}
            arriving = {state for state in arriving if len(state) <= MAX_NESTING}
            proof.findings += _nesting(code, node, call, callee, arriving, timed.get(callee.ref, set()))
            chain.setdefault(callee, node)
            new = arriving - entered.setdefault(callee, set())
            if new:
                entered[callee] |= new
                queue.append(callee)
    return chain


def _function_of(code: _Code, ref: _FunctionRef) -> Function:
    module = code.module(ref.module)
    assert module is not None
    return module.everything[ref.qualname]


def _path_to(chain: dict[_Node, _Node | None], node: _Node) -> list[_Node]:
    out = [node]
    while (parent := chain[out[-1]]) is not None:
        out.append(parent)
    return out[::-1]


def _nesting(
    code: _Code,
    caller: _Node,
    call: ast.Call,
    callee: _Node,
    arriving: set[State],
    calls: set[tuple[str, str]],
) -> list[Finding]:
    """A call made with phases open (here or by the callers on the way) reaches no
    cycle_begin and no begin of a phase already open."""
    module = code.module(caller.ref.module)
    assert module is not None
    out = []
    for state in sorted(arriving):
        problems = []
        if state and ("cycle_begin", "") in calls:
            problems.append("which begins a cycle")
        again = tuple(sorted({label for c, label in calls if c == "begin" and label in state}))
        if again:
            problems.append(f"which begins {_names(again)}")
        for problem in problems:
            out.append(
                Finding(
                    module.path,
                    call.lineno,
                    caller.ref.qualname,
                    f"calls {callee.ref.qualname}, {problem}, while {_names(state)} is open",
                )
            )
    return out


def _statement_of(fn: Function, target: ast.AST) -> ast.stmt | None:
    """The innermost statement of ``fn`` holding ``target``."""
    return next(
        (n for n in ast.walk(fn) if isinstance(n, ast.stmt) and n is not fn and _holds(n, target)), None
    )


def _holds(stmt: ast.stmt, target: ast.AST) -> bool:
    """``target`` is part of ``stmt`` itself, not of a statement nested in it."""
    stack = [c for c in ast.iter_child_nodes(stmt) if not isinstance(c, ast.stmt)]
    while stack:
        node = stack.pop()
        if node is target:
            return True
        stack += [c for c in ast.iter_child_nodes(node) if not isinstance(c, ast.stmt)]
    return False


def prove(series_dir: Path | str) -> Proof:
    """The static proof of one series folder against its pinned release."""
    series_dir = Path(series_dir)
    name, version, patched = patched_files(series_dir)
    return prove_files(series_dir.name, name, version, patched)


# ----------------------------------------------------------------------------- command line


def proved_series() -> list[str]:
    """The shipped series the proof is for: every sglang series."""
    root = series_root()
    return sorted(p.parent.name for p in root.glob("sglang-*/pin.toml"))


@main_boundary("python -m patchkit.author.phaseproof")
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m patchkit.author.phaseproof", description=__doc__.splitlines()[0]
    )
    ap.add_argument("series", nargs="*", help="series folders or shipped series names")
    ap.add_argument("--all", action="store_true", help="every shipped sglang series")
    ap.add_argument("--json", action="store_true", help="one JSON document: a proof per series")
    args = ap.parse_args(argv)
    names = (proved_series() if args.all else []) + list(args.series)
    if not names:
        raise InvalidInput("name a series, or --all")
    proofs = []
    for name in names:
        folder = Path(name) if Path(name).is_dir() else series_root() / name
        if not (folder / "pin.toml").is_file():
            raise InvalidInput(f"{name}: no series folder (pin.toml) there or among the shipped series")
        proofs.append(prove(folder))
    if args.json:
        print(json.dumps([p.to_json() for p in proofs], indent=2, sort_keys=True))
    else:
        for p in proofs:
            head = "proven" if p.ok else f"FAILED ({len(p.findings)} findings)"
            print(
                f"{p.series} (sglang {p.version}, checker {CHECKER_VERSION}): {head}; "
                f"{len(p.reached)} timed functions reached from {', '.join(p.entries)}"
            )
            for f in p.findings:
                print(f"  {f}")
    return 0 if all(p.ok for p in proofs) else 1


if __name__ == "__main__":
    sys.exit(main())
