"""Read a target's copy of a series' files in one connection, for ``patch.rebase --onto-target``.

One read-only program over the target's own transport (local, SSH, container, exec prefix),
built from the same target library as every operation: it finds the layout, reports the git
HEAD of a checkout or the dist-info version of an installed tree, runs one ``wc -l`` and one
sha256 over the pinned files, and prints each file numbered (the drift report's dump). It takes
no lock and writes nothing under the root (only its own temporary directory, removed on exit).

The text is rebuilt here from the dump and accepted only when its sha256 and line count equal
what the target printed, so the pin written for it is exactly the target's text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from patchkit.author.rebase_result import Source
from patchkit.engine.answer import parse_answer
from patchkit.engine.render import shq
from patchkit.engine.series import Series
from patchkit.engine.targetprog import compile_series, library
from patchkit.errors import InvalidInput, Refused
from patchkit.transport import Transport, parse_target
from patchkit.upstream import count_lines, sha256_bytes

_ROOT_OK = re.compile(r"^/[^\0\n]*$")

_READ = r"""
pk_run_read() {  # read-only: layout, HEAD or dist-info version, wc -l + sha256, every file dumped
  pk_layout "$PK_WANT_LAYOUT"
  if [ "$PK_LAYOUT" = checkout ]; then pk_git_check -; else pk_version_check "$PK_DIST" -; fi
  PK_DUMP=0; pk_check_files 0
  PK_DUMP=1; _k=1
  while [ "$_k" -le "$PK_N" ]; do
    pk_get pk_p "$_k"
    [ -f "$_v" ] && pk_dump "$_k" "$_v"
    _k=$((_k + 1))
  done
  exit 0
}
"""


@dataclass
class TargetRead:
    label: str
    layout: str
    git_head: str | None
    version: str | None
    files: dict[str, bytes | None]  # checkout path -> bytes, None when absent

    def describe(self) -> str:
        pin = (
            f"git HEAD {self.git_head}"
            if self.git_head
            else f"installed version {self.version}"
            if self.version
            else "no git HEAD and no dist-info version (the pin holds the file hashes only)"
        )
        return f"target {self.label} ({self.layout} layout, {pin}), read in one connection"


def read_program(series: Series, root: str, layout: str = "auto") -> bytes:
    if not _ROOT_OK.match(root):
        raise InvalidInput(f"target path {root!r} must be absolute and free of NUL/newline")
    if layout not in ("auto", "checkout", "installed"):
        raise InvalidInput(f"--layout must be auto, checkout or installed, not {layout!r}")
    compiled = compile_series(series, full=False)
    dist = re.sub(r"[-_.]+", "_", series.pin.name)
    head = [
        "#!/bin/sh",
        f"# patchkit read (for patch.rebase --onto-target): series {series.name} on {root}",
        f"PK_OP=read PK_ROOT={shq(root)} PK_WANT_LAYOUT={layout} PK_PHASE=all",
        f"PK_SERIES={shq(series.name)} PK_DIGEST={series.digest}",
        f"PK_COMMIT='' PK_VERSION='' PK_DIST={shq(dist)} PK_FORCE=0 PK_DUMP=0",
    ]
    program = (
        "\n".join(head)
        + "\n{\n"
        + library()
        + _READ
        + "\npk_init\n"
        + compiled.data(False, False)
        + "pk_run_read\n}\n"
    )
    return program.encode("utf-8", "surrogateescape")


def read_target(
    series: Series, transport: Transport, *, layout: str = "auto", timeout: float | None = None
) -> TargetRead:
    """The target's files named by the series (pinned and created paths), byte-exact."""
    compiled = compile_series(series, full=False)
    result = transport.run(read_program(series, transport.root, layout), timeout=timeout)
    ans = parse_answer(result.stdout)
    if ans.errors:
        raise Refused(f"{transport.label}: " + "; ".join(m for _, m in ans.errors))
    if result.returncode != 0:
        tail = result.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
        raise Refused(
            f"{transport.label}: the read program failed (exit {result.returncode})"
            + (f": {' | '.join(tail)}" if tail else "")
        )
    files: dict[str, bytes | None] = {}
    for k, plan in enumerate(compiled.plans, 1):
        lines = ans.dumps.get(k)
        tf = ans.files.get(k)
        if lines is None:
            files[plan.path] = None
            continue
        data = b"\n".join(lines)
        wc = tf.wc if tf is not None and tf.wc is not None else None
        if lines and (wc is None or wc == len(lines)):
            data += b"\n"
        if (
            tf is not None
            and tf.sha is not None
            and (sha256_bytes(data) != tf.sha or count_lines(data) != tf.wc)
        ):
            raise Refused(
                f"{transport.label}: {plan.path} could not be read byte-exactly "
                f"(the target says sha256 {tf.sha[:12]}…, wc -l {tf.wc}; read "
                f"{sha256_bytes(data)[:12]}…, {count_lines(data)} lines)"
            )
        files[plan.path] = data
    versions = sorted({v for v, d in ans.dists if v})
    if ans.layout == "installed" and len(versions) > 1:
        raise Refused(
            f"{transport.label}: several {series.pin.name} dist-info versions "
            f"({', '.join(versions)}); cannot tell which one the files belong to"
        )
    head = ans.git_head if ans.git_head and ans.git_head != "unknown" else None
    return TargetRead(
        transport.label,
        ans.layout or layout,
        head,
        versions[0] if versions and ans.layout == "installed" else None,
        files,
    )


def target_source(
    series: Series,
    spec: str | Transport,
    *,
    cwd: str | None = None,
    container: str | None = None,
    exec_prefix: str | None = None,
    layout: str = "auto",
    timeout: float | None = None,
    transport_options: dict | None = None,
) -> Source:
    """A rebase Source made of what ``spec`` holds, pinned to exactly that text."""
    own = not isinstance(spec, Transport)
    transport = (
        spec
        if isinstance(spec, Transport)
        else parse_target(
            spec, cwd=cwd, container=container, exec_prefix=exec_prefix, **(transport_options or {})
        )
    )
    try:
        got = read_target(series, transport, layout=layout, timeout=timeout)
    finally:
        if own:
            transport.close()
    name = series.pin.name
    label = f"{name} on {got.label}"
    return Source(
        label, got.describe(), got.version, got.git_head if got.layout == "checkout" else None, got.files
    )


__all__ = ["TargetRead", "read_program", "read_target", "target_source"]
