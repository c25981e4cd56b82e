"""Helpers for engine tests: real git makes the diffs, a pin is computed from real bytes."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

from patchkit.transport import LocalTransport


def git(cwd, *args, input=None, check=True) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["git", "-c", "core.autocrlf=false", "-c", "core.safecrlf=false", *args],
        cwd=cwd,
        input=input,
        capture_output=True,
        check=check,
    )


def write_tree(root: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)


def read_tree(root: Path, paths) -> dict[str, bytes | None]:
    return {p: (root / p).read_bytes() if (root / p).exists() else None for p in paths}


def pin_toml(files: dict[str, bytes], name="demo", extra_upstream="") -> str:
    out = [f'[upstream]\nname = "{name}"\n{extra_upstream}']
    for rel, data in sorted(files.items()):
        nl = data.count(b"\n")
        out.append(f'[[file]]\npath = "{rel}"\nsha256 = "{hashlib.sha256(data).hexdigest()}"\nlines = {nl}\n')
    return "\n".join(out)


def git_diff(
    before: dict[str, bytes | None], after: dict[str, bytes | None], workdir: Path, context: int = 3
) -> bytes:
    """The diff `git diff` prints for before -> after (None = absent)."""
    repo = workdir / "diffrepo"
    if repo.exists():
        subprocess.run(["rm", "-rf", str(repo)], check=True)
    repo.mkdir(parents=True)
    git(repo, "init", "-q")
    write_tree(repo, {k: v for k, v in before.items() if v is not None})
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", "before")
    for k, v in after.items():
        p = repo / k
        if v is None:
            if p.exists():
                p.unlink()
        else:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(v)
    git(repo, "add", "-A")
    return git(repo, "diff", "--cached", f"-U{context}", "--no-renames", "--binary").stdout


def make_series(
    directory: Path,
    pinned: dict[str, bytes],
    patches: list[tuple[str, bytes]],
    name="demo",
    extra_upstream="",
) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "pin.toml").write_text(pin_toml(pinned, name, extra_upstream))
    (directory / "series").write_text("".join(f"{n}\n" for n, _ in patches))
    for n, data in patches:
        (directory / n).write_bytes(data)
    return directory


def git_apply_result(before: dict[str, bytes | None], patch: bytes, workdir: Path) -> dict:
    """Apply with `git apply` (no fuzz, no offsets allowed) into a scratch tree; return the files."""
    tree = workdir / "gitapply"
    subprocess.run(["rm", "-rf", str(tree)], check=True)
    tree.mkdir(parents=True)
    write_tree(tree, {k: v for k, v in before.items() if v is not None})
    env = dict(os.environ, GIT_CEILING_DIRECTORIES=str(workdir))
    proc = subprocess.run(
        ["git", "apply", "--unidiff-zero", "--whitespace=nowarn", "-"],
        cwd=tree,
        input=patch,
        capture_output=True,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    return read_tree(tree, before.keys())


def busybox_local(busybox_bin: Path, root: Path) -> LocalTransport:
    return LocalTransport(
        label=f"busybox:{root}",
        root=str(root),
        shell=(str(busybox_bin / "busybox"), "sh", "-s"),
        env={"PATH": str(busybox_bin), "LC_ALL": "C"},
    )
