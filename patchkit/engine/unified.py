"""A series as one unified diff, for tools that show what an apply or a revert changes (the
Ansible collection's diff mode): the patches' diff sections in series order (their free-form
headers left out), with paths as the target spells them, or the reverse for a revert.

The pin proves the target holds exactly the pinned text before apply, so the series' own diffs
are exactly what apply changes; stacked patches read as quilt shows them, one after another.
"""

from __future__ import annotations

import re

from patchkit.engine.series import parse_pin, read_series
from patchkit.paths import strip_prefix

_HUNK = re.compile(r"@@ -(\d+(?:,\d+)?) \+(\d+(?:,\d+)?) @@(.*)\Z")


def series_unified_diff(series_dir: str, *, installed: bool = False, reverse: bool = False) -> str:
    files = read_series(series_dir)
    prefix = parse_pin(files.pin_bytes.decode("utf-8", "replace"), files.pin_path).package_prefix
    prefix = prefix if installed else None
    sections = []
    for _, data in files.patches:
        text = data.decode("utf-8", "surrogateescape")
        start = text.find("diff --git ")
        if start < 0:
            start = text.find("--- ")
        body = [_respell(line, prefix) for line in text[max(start, 0) :].splitlines()]
        sections.append(body)
    if reverse:
        sections = [_reverse(body) for body in reversed(sections)]
    return "".join(line + "\n" for body in sections for line in body)


def _respell(line: str, prefix: str | None) -> str:
    if not prefix:
        return line
    if line.startswith("diff --git a/"):
        a, _, b = line[len("diff --git a/") :].partition(" b/")
        return f"diff --git a/{strip_prefix(a, prefix)} b/{strip_prefix(b, prefix)}"
    for head in ("--- a/", "+++ b/"):
        if line.startswith(head):
            return head + strip_prefix(line[len(head) :], prefix)
    return line


def _reverse(body: list[str]) -> list[str]:
    """The same diff read backwards: old and new swapped in headers, hunk ranges and lines."""
    out: list[str] = []
    i = left_old = left_new = 0
    while i < len(body):
        line = body[i]
        in_hunk = left_old > 0 or left_new > 0
        if in_hunk:  # a body line: counted, so a '--- ' line of text is never a header
            if line.startswith(("-", " ")) or line == "":
                left_old -= 1
            if line.startswith(("+", " ")) or line == "":
                left_new -= 1
            out.append({"+": "-", "-": "+"}.get(line[:1], line[:1]) + line[1:])
            i += 1
            continue
        if line.startswith("--- ") and i + 1 < len(body) and body[i + 1].startswith("+++ "):
            old, new = line[4:], body[i + 1][4:]
            out += ["--- " + _side(new, "a/"), "+++ " + _side(old, "b/")]
            i += 2
            continue
        m = _HUNK.match(line)
        if m:
            out.append(f"@@ -{m.group(2)} +{m.group(1)} @@{m.group(3)}")
            left_old, left_new = _count(m.group(1)), _count(m.group(2))
        elif line.startswith("new file mode"):
            out.append("deleted file mode" + line[len("new file mode") :])
        elif line.startswith("deleted file mode"):
            out.append("new file mode" + line[len("deleted file mode") :])
        else:
            out.append(line)
        i += 1
    return out


def _side(path: str, want: str) -> str:
    if path == "/dev/null":
        return path
    return want + path[2:] if path[:2] in ("a/", "b/") else path


def _count(rng: str) -> int:
    return int(rng.split(",")[1]) if "," in rng else 1
