"""The local kind: a directory on this machine (`/abs/dir`, `rel/dir` from where invoke runs).

It has no prefix and is tried last (patchkit.transport.target_kinds): whatever no other kind
took is a local path.
"""

from __future__ import annotations

import os

from patchkit.errors import InvalidInput
from patchkit.transport import LocalTransport, TargetKind, Transport, register_kind


def resolve(
    spec: str, *, cwd: str | None = None, container: str | None = None, exec_prefix: str | None = None, **_
) -> Transport:
    if container or exec_prefix:
        raise InvalidInput(f"target {spec!r}: --container/--exec need a remote or exec target")
    path = os.path.abspath(os.path.join(cwd or os.getcwd(), os.path.expanduser(spec)))
    return LocalTransport(label=path, root=path)


KIND = register_kind(TargetKind("local", prefix=None, resolve=resolve, fallback=True))
