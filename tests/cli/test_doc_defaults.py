"""The defaults the docs state in prose (docs/tasks.md, docs/profiling.md,
docs/targets.md, README.md) are the option table's. Each statement of a default (``default 3``,
``default 60 s``, ``default unset``, ``` `fleet`, the default```) is found by its pattern and
compared with the row it names; a new statement the walk does not know fails until it is added
to STATEMENTS, so a default changed in the table cannot leave the docs stating the old one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from patchkit.settings import MAX_ROUNDS, REMOTE_REPEAT, SWEEP_REPEAT, default, offered

REPO = Path(__file__).resolve().parents[2]
DOCS = ("docs/tasks.md", "docs/profiling.md", "docs/targets.md", "README.md")
# the words that state a default: "default 3", "default 60 s", "default unset", "`x`, the default"
STATED = re.compile(r"default (\d+(?:\.\d+)?|unset)\b|`[\w.-]+`, the default\b")


def _repeat_help(front: str) -> str:
    return offered(front)["repeat"].help_text


# (file, the statement with its value as group 1, the table's value)
STATEMENTS = [
    ("docs/profiling.md", r"`--repeat N` \(default (\d+)\)", SWEEP_REPEAT),
    (
        "docs/profiling.md",
        r"`profile\.remote --matrix`, with or without `--baseline`, default (\d+);",
        REMOTE_REPEAT,
    ),
    ("docs/profiling.md", r"`profile\.sweep`, default (\d+)\)", SWEEP_REPEAT),
    ("docs/profiling.md", r"`--repeat` rounds \(default (\d+) here\)", MAX_ROUNDS),
    ("docs/profiling.md", r"setting `timer_sample`, default (unset)", default("profile.remote.timer_sample")),
    ("docs/profiling.md", r"setting `blocks`: `(\w+)`, the default", default("profile.remote.blocks")),
    (
        "docs/profiling.md",
        r"\(`--(warmup|no-warmup)`, the default",
        "warmup" if default("profile.warmup") and default("profile.remote.warmup") else "no-warmup",
    ),
    ("docs/targets.md", r"`patchkit\.ssh_persist`, default (\d+) s", default("ssh_persist")),
    ("docs/targets.md", r"\(`--jobs`, default (\d+)\)", default("jobs")),
    (
        "docs/profiling.md",
        r"\*\*`--min-effect PCT`\*\* \(default (\d+)",
        default("profile.remote.min_effect"),
    ),
    ("docs/profiling.md", r"\*\*`--power P`\*\* \(default (\d+(?:\.\d+)?)", default("profile.remote.power")),
    ("README.md", r"decide `--min-effect` \(default (\d+)", default("profile.remote.min_effect")),
]


def _value(said: str):
    if said == "unset":
        return None
    try:
        return float(said)
    except ValueError:
        return said


def _same(value):
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


@pytest.mark.parametrize("where, pattern, table", STATEMENTS, ids=[p for _, p, _ in STATEMENTS])
def test_a_stated_default_is_the_tables(where, pattern, table):
    text = (REPO / where).read_text(encoding="utf-8")
    found = re.findall(pattern, text.replace("\n", " "))
    assert len(found) == 1, f"{where}: {pattern!r} found {len(found)} times"
    assert _value(found[0]) == _same(table), f"{where}: states {found[0]}, the option table {table!r}"


def test_every_stated_default_is_walked():
    """Each place the docs state a default is one of STATEMENTS (a new one: add it there)."""
    unknown = []
    for where in DOCS:
        text = (REPO / where).read_text(encoding="utf-8").replace("\n", " ")
        covered = [m.span() for w, p, _ in STATEMENTS if w == where for m in re.finditer(p, text)]
        for m in STATED.finditer(text):
            if not any(start < m.end() and m.start() < end for start, end in covered):
                unknown.append(f"{where}: ...{text[max(0, m.start() - 60) : m.end()]}")
    assert not unknown, "defaults stated in the docs but not compared with the table:\n" + "\n".join(unknown)


def test_the_help_texts_state_the_same_repeat_defaults():
    assert f"(default {SWEEP_REPEAT})" in _repeat_help("profile.sweep")
    assert f"(default {REMOTE_REPEAT})" in _repeat_help("profile.remote")
    assert f"default {MAX_ROUNDS}" in offered("profile.remote")["budget"].help_text


def test_a_changed_default_is_named():
    text = "`patchkit.ssh_persist`, default 30 s"
    said = re.findall(STATEMENTS[7][1], text)
    assert said == ["30"] and _value(said[0]) != _same(default("ssh_persist"))
