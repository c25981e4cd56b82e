"""Reading invoke.yaml as the docs write it: every key, commented-out ones included; and a
task's Context with a site's invoke.yaml loaded."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import yaml
from invoke import Config, Context

from patchkit.settings import PATCHKIT_DEFAULTS

# a key line, set or commented out: `  jobs: 8` or `  # jobs: 8`
KEY_LINE = re.compile(r"^(?P<indent> *)(?P<comment># )?(?P<key>[a-z0-9_]+):(?=\s|$)(?P<value>[^#]*)")


def key_lines(text: str) -> Iterator[tuple[tuple[str, ...], str]]:
    """(dotted path, the text after the colon) of every key line. Commented-out keys count
    only at the indentation of their block's keys (deeper comments are prose); a set key
    with nothing after its colon opens a block."""
    stack: list[tuple[int, str]] = []  # (indent, key) of the set keys enclosing the line
    for line in text.splitlines():
        m = KEY_LINE.match(line)
        if not m:
            continue
        indent = len(m["indent"])
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if m["comment"] and indent != (stack[-1][0] + 2 if stack else 0):
            continue
        yield (*(k for _, k in stack), m["key"]), m["value"]
        if not m["comment"] and not m["value"].strip():
            stack.append((indent, m["key"]))


def site_context(tmp_path: Path, patchkit: dict) -> Context:
    """An invoke Context as a task sees it when the site's invoke.yaml holds ``patchkit``: the
    option table's defaults, then that file (written to ``tmp_path``) loaded over them."""
    config = Config(defaults={"patchkit": dict(PATCHKIT_DEFAULTS)})
    path = tmp_path / "site.yaml"
    path.write_text(yaml.safe_dump({"patchkit": patchkit}))
    config.set_runtime_path(str(path))
    config.load_runtime()
    return Context(config=config)
