"""Writing diff text in patchkit's one fixed format: git-style ``a/`` ``b/`` prefixes, no
function names after ``@@``, "\\ No newline at end of file" where a file ends without one.

Authoring writes every patch through these (``patchkit.author.authoring``), and a series' runtime
patch is rendered with ``new_file_patch`` (``patchkit.engine.runtime_patch``). Standard library
only: the wheel build (setup.py) renders the runtime patches with it before any dependency is
installed.
"""

from __future__ import annotations

from patchkit.errors import InvalidInput

NO_NEWLINE = "\\ No newline at end of file\n"


def split_lines(text: str) -> list[str]:
    """Lines with their "\n" kept; only "\n" separates lines (a "\r" stays in its line).

    str.splitlines() would also break on \x0c, \x1c, \u2028..., which real sources contain.
    """
    lines = text.split("\n")
    out = [ln + "\n" for ln in lines[:-1]]
    if lines[-1]:
        out.append(lines[-1])
    return out


def emit_line(prefix: str, line: str) -> str:
    """One diff body line: ``prefix`` (" ", "-" or "+") and the line, marked when it has no "\n"."""
    if line.endswith("\n"):
        return prefix + line
    return prefix + line + "\n" + NO_NEWLINE


def hunk_range(start: int, length: int) -> str:
    """One side of an ``@@`` header for ``length`` lines after line ``start`` (0-based)."""
    # Unified-diff convention (as GNU diff and difflib): an empty range names the line before.
    if length == 1:
        return f"{start + 1}"
    if length == 0:
        return f"{start},0"
    return f"{start + 1},{length}"


def new_file_patch(path: str, text: str) -> str:
    """Git-style diff that creates ``path`` with ``text`` (mode 100644)."""
    lines = split_lines(text)
    if not lines:
        raise InvalidInput(f"{path}: an empty new file cannot be expressed as a hunk")
    body = "".join(emit_line("+", line) for line in lines)
    return (
        f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
        f"@@ -0,0 +{hunk_range(0, len(lines))} @@\n{body}"
    )
