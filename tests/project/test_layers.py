"""The import graph of patchkit: no circles, and no import that points up the layers.

The graph is read from the source with ``ast`` (nothing is imported), one node per module
(a package is its ``__init__``). An edge is every ``import patchkit...`` /
``from patchkit... import ...`` / relative import, wherever it stands:

- module-level imports count;
- function-level (lazy) imports count too. Deferring an import changes when it runs, not
  what depends on what: the three circles this test was written against
  (profile.remote <-> remote_sweep, remote_config <-> server_args, report.overhead <->
  summarize) all closed through an import inside a function;
- imports under ``if TYPE_CHECKING:`` do not count (they never run);
- a package's ``__init__`` importing its own submodules does not count: the package is the
  facade above its rooms (``patchkit.transport.parse_target`` dispatching to ``ssh``/``k8s``,
  ``patchkit.profile.remote`` re-exporting ``run_remote``), and every submodule import
  runs the package first anyway. A submodule importing its package does count.

Layers, lowest first. A module may import its own group (``patchkit.X`` and everything
under it) and any group of a lower rank; groups of one rank are siblings and may not import
each other. Every module of patchkit must belong to a group listed here, so a new top-level
module is placed on purpose.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "patchkit"

LAYERS: list[tuple[str, ...]] = [
    # the package root names nothing of its own; Ctrl-C while a program starts (site runs it)
    ("patchkit", "patchkit.errors", "patchkit.startup"),
    (
        "patchkit.paths",
        "patchkit.locations",  # pure path rules; where series and caches are;
        "patchkit.boundary",
        "patchkit.extras",  # which optional extras are installed (find_spec)
    ),  # the exit-code boundary (errors -> codes)
    ("patchkit.pin", "patchkit.timing"),  # the pin.toml model; the runtime file
    ("patchkit.upstream",),  # pinned wheels, git blobs, version keys
    ("patchkit.transport",),  # one method: run a program on a host root
    ("patchkit.engine",),  # series, plans, the target program, answers
    ("patchkit.proofs",),  # how each shipped series is proven (patches/proofs.toml)
    ("patchkit.catalog",),  # the shipped series listed: upstream, releases, proof (patch.series)
    ("patchkit.settings",),  # the patch.* settings and their defaults
    ("patchkit.ops",),  # the fleet: engine programs over transports
    ("patchkit.report",),  # timing files -> summary, table, chart
    ("patchkit.author", "patchkit.profile"),  # authoring/rebase; profile runs (use report)
    ("patchkit.output",),  # rendering fleet results for the tasks
    ("patchkit.taskrun",),  # the patch.* tasks' shared body
    ("patchkit.tasks",),  # the invoke task surface
    ("patchkit.command",),  # the installed `patchkit` program
]

# (importer, imported): the allowed upward or sideways imports, each with its reason.
ALLOWED: dict[tuple[str, str], str] = {}


def modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports(name: str, path: Path, known: dict[str, Path]) -> dict[str, int]:
    """{imported patchkit module: line} for one module, by the rules in the docstring."""

    def resolve(dotted: str) -> str | None:
        while dotted and dotted not in known:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: dict[str, int] = {}

    def add(target: str | None, line: int) -> None:
        if target is None or target == name:
            return
        if path.name == "__init__.py" and target.startswith(name + "."):
            return  # a package facade importing its own rooms
        found.setdefault(target, line)

    def walk(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for sub in child.orelse:
                    walk(sub)
                continue
            if isinstance(child, ast.Import):
                for alias in child.names:
                    if alias.name.split(".")[0] == "patchkit":
                        add(resolve(alias.name), child.lineno)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")[: len(package.split(".")) - child.level + 1]
                    source = ".".join(base + ([child.module] if child.module else []))
                else:
                    source = child.module or ""
                if source.split(".")[0] != "patchkit":
                    continue
                for alias in child.names:  # `from patchkit.report import window` names a module
                    sub = f"{source}.{alias.name}"
                    add(sub if sub in known else resolve(source), child.lineno)
            walk(child)

    walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
    return found


def graph() -> dict[str, dict[str, int]]:
    known = modules()
    return {name: imports(name, path, known) for name, path in sorted(known.items())}


def cycles(edges: dict[str, dict[str, int]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(edges.get(root, ())))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(edges.get(child, ()))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def group_of(module: str) -> tuple[str, int] | None:
    """(group, rank) of a module: the longest listed group that is the module or holds it."""
    best = None
    for rank, groups in enumerate(LAYERS):
        for group in groups:
            inside = (module == group or module.startswith(group + ".")) and group != "patchkit"
            if inside and (best is None or len(group) > len(best[0])):
                best = (group, rank)
    return best or (("patchkit", 0) if module == "patchkit" else None)


def upward(edges: dict[str, dict[str, int]]) -> list[str]:
    bad = []
    for importer, targets in edges.items():
        g_from, r_from = group_of(importer)
        for target, line in sorted(targets.items()):
            g_to, r_to = group_of(target)
            if g_to == g_from or r_to < r_from or (importer, target) in ALLOWED:
                continue
            how = "a sibling" if r_to == r_from else "a higher layer"
            bad.append(
                f"{importer} (line {line}) imports {target}: {how} ({g_to}, rank {r_to} "
                f"over {g_from}, rank {r_from})"
            )
    return bad


# ------------------------------------------------------------------------ the checks themselves


def test_every_module_has_a_layer():
    missing = [m for m in modules() if group_of(m) is None]
    assert not missing, f"place these in LAYERS: {missing}"


def test_no_import_cycles():
    found = cycles(graph())
    assert not found, "import circles: " + "; ".join(" <-> ".join(c) for c in found)


def test_no_upward_imports():
    bad = upward(graph())
    assert not bad, "\n".join(bad)


def test_allowed_exceptions_are_still_needed():
    edges = graph()
    stale = [pair for pair in ALLOWED if pair[1] not in edges.get(pair[0], {})]
    assert not stale, f"ALLOWED lists imports that no longer exist: {stale}"


# --------------------------------------------------- the checker on small trees (it can fail)


def _tree(tmp_path, files: dict[str, str]) -> dict[str, dict[str, int]]:
    global PACKAGE
    root = tmp_path / "patchkit"
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    saved, PACKAGE = PACKAGE, root
    try:
        return graph()
    finally:
        PACKAGE = saved


def test_checker_finds_a_circle_through_a_function_level_import(tmp_path):
    edges = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "report/__init__.py": "",
            "report/summarize.py": "from patchkit.report.kinds import k\n"
            "def f():\n    from patchkit.report.overhead import g\n",
            "report/overhead.py": "from .summarize import percentile\n",
            "report/kinds.py": "",
        },
    )
    assert cycles(edges) == [["patchkit.report.overhead", "patchkit.report.summarize"]]


def test_checker_ignores_type_checking_and_the_package_facade(tmp_path):
    edges = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "transport/__init__.py": "def parse():\n    from patchkit.transport import ssh\n",
            "transport/ssh.py": "from typing import TYPE_CHECKING\nfrom patchkit.transport import T\n"
            "if TYPE_CHECKING:\n    from patchkit.engine import plan\n",
            "engine/__init__.py": "",
            "engine/plan.py": "",
        },
    )
    assert cycles(edges) == []
    assert edges["patchkit.transport.ssh"] == {"patchkit.transport": 2}
    assert edges["patchkit.transport"] == {}


def test_checker_finds_upward_and_sibling_imports(tmp_path):
    edges = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "engine/__init__.py": "",
            "engine/autoseries.py": "def f():\n    from patchkit.author.sglang_releases import v\n",
            "author/__init__.py": "",
            "author/sglang_releases.py": "from patchkit.engine import autoseries\n",
            "profile/__init__.py": "",
            "profile/site.py": "import patchkit.author.sglang_releases\n",
        },
    )
    bad = upward(edges)
    assert len(bad) == 2, bad
    assert bad[0].startswith(
        "patchkit.engine.autoseries (line 2) imports patchkit.author.sglang_releases: a higher layer"
    )
    assert bad[1].startswith(
        "patchkit.profile.site (line 1) imports patchkit.author.sglang_releases: a sibling"
    )


@pytest.mark.parametrize("module", ["patchkit.profile.remote", "patchkit.author.upstream"])
def test_old_import_paths_still_work(module):
    import importlib

    mod = importlib.import_module(module)
    if module == "patchkit.author.upstream":
        import patchkit.upstream

        assert mod is patchkit.upstream  # one module object: monkeypatching reaches every caller
    else:
        assert {"RemoteConfig", "run_remote", "run_remote_sweep"} <= set(dir(mod))
