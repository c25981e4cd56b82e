"""The runtime's source as it ships: a short module docstring that points to patchkit's
docs/runtime.md (the file lands in users' SGLang trees, where no repository is at hand), every
setting it reads documented there, no reference to a section that does not exist, and functions
short enough to read (none over 80 lines)."""

import ast
import re
from pathlib import Path

from patchkit.timing import runtime_source

DOC = Path(__file__).resolve().parents[2] / "docs" / "runtime.md"


def test_the_module_docstring_is_short_and_points_to_the_docs():
    doc = ast.get_docstring(ast.parse(runtime_source()), clean=False)
    assert doc is not None
    assert len(doc.splitlines()) <= 25
    assert "patchkit's docs/runtime.md" in " ".join(doc.split())
    assert "http" not in doc  # no repository address: the name says where


def test_every_setting_the_runtime_reads_is_in_docs_runtime_md():
    settings = set(re.findall(r"PATCHKIT_TIMER[A-Z_]*", runtime_source()))
    assert len(settings) >= 15
    doc = DOC.read_text(encoding="utf-8")
    section = doc.split("\n## Settings\n", 1)[1].split("\n## ", 1)[0]
    assert sorted(s for s in settings if not re.search(r"`%s\b" % s, section)) == []


def test_no_reference_to_a_readme_section():
    """The runtime once cited "README 6", a section that does not exist."""
    assert not re.search(r"README\s*\d", runtime_source())


def test_no_function_is_over_80_lines():
    tree = ast.parse(runtime_source())
    long = [
        (node.name, node.end_lineno - node.lineno + 1)
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 80
    ]
    assert long == []
