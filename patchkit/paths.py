"""Path rules shared by the pin and the diff parser.

A path names a file under the target root. It must be relative, already normalised, free of `..`,
NUL and control characters, and must not reach into patchkit's own state or into `.git`.
"""

from __future__ import annotations

import posixpath

RESERVED_COMPONENTS = (".patchkit", ".git")


def path_problem(path: str) -> str | None:
    """Return why `path` is unsafe, or None when it is acceptable."""
    if not path:
        return "empty path"
    if any(ord(ch) < 32 or ch == "\x7f" for ch in path):
        return "path contains a control character (NUL, newline, tab...)"
    if path != path.strip() or any(part != part.strip() for part in path.split("/")):
        return "leading or trailing whitespace in a path component"
    if path.startswith("/"):
        return "absolute path"
    if "\\" in path:
        return "backslash in path"
    parts = path.split("/")
    if ".." in parts:
        return "path contains '..'"
    if posixpath.normpath(path) != path or "" in parts or "." in parts:
        return "path is not normalised (empty or '.' components, trailing slash)"
    for part in parts:
        if part in RESERVED_COMPONENTS:
            return f"path reaches into {part}/"
    return None


def strip_prefix(path: str, prefix: str | None) -> str:
    """Drop `package_prefix` (e.g. 'python/') for an installed layout."""
    if prefix and path.startswith(prefix):
        return path[len(prefix) :]
    return path
