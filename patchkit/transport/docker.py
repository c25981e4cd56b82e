"""`docker://CONTAINER/abs/path`: a folder inside a container of this machine (the docker target
kind, `KIND`): `docker exec -i CONTAINER sh -s` (the container_engine option: podman, ...)."""

from __future__ import annotations

from patchkit.errors import InvalidInput
from patchkit.transport import TargetKind, Transport, register_kind
from patchkit.transport.execprefix import exec_transport
from patchkit.transport.remote import (
    PREFIX_OPTIONS,
    checked_options,
    container_prefix,
    given_prefix,
    split_docker_url,
)

PREFIX = "docker://"


def docker_target(
    spec: str,
    *,
    cwd: str | None = None,
    container: str | None = None,
    exec_prefix: str | None = None,
    **options,
) -> Transport | None:
    """The Transport of a docker:// spec; None for any other."""
    opts = checked_options(options)
    container, prefix = given_prefix(spec, container, exec_prefix)
    if not spec.startswith(PREFIX):
        return None
    if container is not None or prefix is not None:
        raise InvalidInput(f"target {spec!r}: docker:// already names the container; drop --container/--exec")
    name, root = split_docker_url(spec)
    return exec_transport(spec, root, container_prefix(name, opts), opts)


def _resolve(spec: str, **kw) -> Transport:
    found = docker_target(spec, **kw)
    assert found is not None, "the kind's prefix: a docker:// spec"
    return found


KIND = register_kind(TargetKind("docker", prefix=PREFIX, options=PREFIX_OPTIONS, resolve=_resolve))
