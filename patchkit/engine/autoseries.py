"""``--series auto``: pick the shipped series pinned to exactly the text a target has.

One round trip per target: a small POSIX program reads the installed version(s) from
``<name>-*.dist-info/METADATA``, the series named in patchkit's own ``.patchkit/manifest`` (a
target patchkit has applied to: its files no longer hash as any pin, so status and revert take
the series recorded there, when it is the shipped one byte for byte), and the sha256 of every
candidate file (each file pinned by any shipped series, deduplicated, in both the checkout and
the installed spelling). A series matches
when every file it pins is there with its pinned sha256 (and, on an installed layout, the
version is one the pin names). Exactly one match is chosen and said; none is refused (exit 1)
naming the closest series and what differs. ``resolve_per_host`` (the patch.* tasks) gives each
host of a fleet its own series; ``resolve`` (the profile runs) needs one series for all hosts.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from patchkit.engine.series import Pin, parse_pin
from patchkit.errors import InvalidInput, PatchkitError, Refused
from patchkit.locations import series_root
from patchkit.transport import expand_targets, parse_target

SHIPPED = series_root()


@dataclass
class Candidate:
    directory: Path
    pin: Pin


@dataclass
class Seen:
    """What one target has: dist-info versions and sha256 per relative path present."""

    label: str
    versions: list[str]
    hashes: dict[str, str]
    manifest: tuple[str, str] | None = None  # (series name, digest) patchkit left on the target


def candidates(root: Path = SHIPPED) -> list[Candidate]:
    out = []
    for pin_file in sorted(Path(root).glob("*/pin.toml")):
        out.append(Candidate(pin_file.parent, parse_pin(pin_file.read_text(), str(pin_file))))
    if not out:
        raise InvalidInput(f"--series auto: no shipped series under {root}")
    return out


def release(pin: Pin) -> str:
    """What a series is pinned to, as every auto line names it: the pin's own package name and
    version (``transformers 5.17.0``, ``sglang 0.5.9``)."""
    return f"{pin.name} {pin.version}" if pin.version else pin.name


def _spellings(path: str, prefix: str | None) -> list[str]:
    if prefix and path.startswith(prefix):
        return [path, path[len(prefix) :]]
    return [path]


def probe_program(root: str, dist_names: list[str], paths: list[str]) -> bytes:
    """The one program sent to the target; prints 'dist VERSION' and 'file SHA PATH' lines."""
    quoted = " ".join(shlex.quote(p) for p in paths)
    dists = " ".join(shlex.quote(d) for d in dist_names)
    return f"""set -f
cd {shlex.quote(root)} 2>/dev/null || {{ echo "noroot"; exit 3; }}
if command -v sha256sum >/dev/null 2>&1; then sha() {{ sha256sum; }}
elif command -v shasum >/dev/null 2>&1; then sha() {{ shasum -a 256; }}
else echo "nosha"; exit 3; fi
set +f
for n in {dists}; do
  for d in "$n"-*.dist-info; do
    [ -f "$d/METADATA" ] || continue
    printf 'dist %s\\n' "$(sed -n 's/^Version:[ 	]*//p' "$d/METADATA" | sed -n 1p)"
  done
done
set -f
[ -f .patchkit/manifest ] && sed -n 's/^series /manifest /p' .patchkit/manifest | sed -n 1p
for p in {quoted}; do
  if [ -f "$p" ]; then printf 'file %s %s\\n' "$(sha < "$p" | cut -d' ' -f1)" "$p"; fi
done
""".encode()


def read_target(spec, cands: list[Candidate], timeout: float | None = None, **target_options) -> Seen:
    """What ``spec`` holds (one round trip), within ``timeout`` seconds (None: the transport's own
    limit): the operation's --timeout, so that a host that never answers fails as soon here."""
    paths: list[str] = []
    dists: list[str] = []
    for c in cands:
        dist = c.pin.name.replace("-", "_").replace(".", "_")
        if dist not in dists:
            dists.append(dist)
        for f in c.pin.files.values():
            for p in _spellings(f.path, c.pin.package_prefix):
                if p not in paths:
                    paths.append(p)
    # a spec string, or a Transport already made (hosts of an --inventory): that one belongs to
    # the caller, who runs the operation over it next, so it is not closed here
    own = isinstance(spec, str)
    transport = parse_target(spec, **target_options) if own else spec
    try:
        result = transport.run(probe_program(transport.root, dists, paths), timeout=timeout)
    finally:
        if own:
            transport.close()
    out = result.stdout.decode("utf-8", "replace").splitlines()
    if "noroot" in out:
        raise Refused(f"{transport.label}: {transport.root} does not exist or is not a folder")
    if "nosha" in out:
        raise Refused(f"{transport.label}: no sha256 tool (sha256sum or shasum)")
    if result.returncode != 0:
        tail = result.stderr.decode("utf-8", "replace").strip().splitlines()[-2:]
        raise Refused(
            f"{transport.label}: reading the target failed (exit {result.returncode})"
            + (": " + " | ".join(tail) if tail else "")
        )
    versions = [ln[5:] for ln in out if ln.startswith("dist ")]
    hashes = {}
    for ln in out:
        if ln.startswith("file "):
            _, sha, path = ln.split(" ", 2)
            hashes[path] = sha
    manifest = next(
        (tuple(ln.split()[1:3]) for ln in out if ln.startswith("manifest ") and len(ln.split()) >= 3), None
    )
    return Seen(transport.label, versions, hashes, manifest)


def _differences(c: Candidate, seen: Seen) -> list[str]:
    diffs = []
    for f in c.pin.files.values():
        got = [seen.hashes[p] for p in _spellings(f.path, c.pin.package_prefix) if p in seen.hashes]
        name = Path(f.path).name
        if not got:
            diffs.append(f"{name} is missing")
        elif f.sha256 not in got:
            diffs.append(f"{name} has sha256 {got[0][:12]}…, pinned {f.sha256[:12]}…")
    if seen.versions and c.pin.version and not set(seen.versions) & set(c.pin.versions):
        diffs.append(f"installed version {', '.join(seen.versions)}, pinned {' or '.join(c.pin.versions)}")
    return diffs


def _version_distance(c: Candidate, versions: list[str]) -> tuple:
    from patchkit.upstream import version_key

    if not versions or not c.pin.version:
        return (1,)
    try:
        want = version_key(versions[0])
        return (0, min(abs(_num(version_key(v)) - _num(want)) for v in c.pin.versions))
    except ValueError:
        return (1,)


def _num(key: tuple[int, ...]) -> int:
    return sum(k * 1000 ** (4 - i) for i, k in enumerate(key[:5]))


def _from_manifest(seen: Seen, cands: list[Candidate]) -> Candidate | None:
    """The series patchkit applied to this target (its files no longer hash as any pin)."""
    if seen.manifest is None:
        return None
    from patchkit.engine.series import load_series

    name, digest = seen.manifest
    for c in cands:
        if c.directory.name == name:
            if load_series(str(c.directory)).digest == digest:
                return c
            raise Refused(
                f"{seen.label}: --series auto: the target carries series {name} "
                f"{digest[:12]}, not the shipped {name}; pass that series folder"
            )
    raise Refused(
        f"{seen.label}: --series auto: the target carries series {name} {digest[:12]}, "
        "which is not shipped here; pass that series folder"
    )


def choose(seen: Seen, cands: list[Candidate]) -> Candidate:
    carried = _from_manifest(seen, cands)
    if carried is not None:
        return carried
    matching = [c for c in cands if not _differences(c, seen)]
    if len(matching) == 1:
        return matching[0]
    if len(matching) > 1:
        # Several pins agree (e.g. one pins a subset of another's files): the one pinning most.
        matching.sort(key=lambda c: -len(c.pin.files))
        if len(matching[0].pin.files) > len(matching[1].pin.files):
            return matching[0]
        raise Refused(
            f"{seen.label}: --series auto: {', '.join(c.directory.name for c in matching)} "
            "all match; pass --series"
        )
    if not seen.versions and not seen.hashes:
        raise Refused(_not_an_install(seen, cands))
    # closest: the nearest version, then the series whose files are there (a file with other
    # bytes is nearer than one missing: a transformers tree is not "closest" to an sglang pin)
    ranked = sorted(
        cands,
        key=lambda c: (
            _version_distance(c, seen.versions),
            sum(d.endswith(" is missing") for d in _differences(c, seen)),
            len(_differences(c, seen)),
        ),
    )
    best = ranked[0]
    what = "; ".join(_differences(best, seen))
    found = f"installed version {', '.join(seen.versions)}" if seen.versions else "no dist-info"
    raise Refused(
        f"{seen.label}: --series auto: no shipped series is pinned to this text ({found}); "
        f"closest: {best.directory.name} ({release(best.pin)}): {what}"
    )


def _not_an_install(seen: Seen, cands: list[Candidate]) -> str:
    """The refusal for a folder that holds none of what any shipped series pins: naming a
    closest release there would send the user comparing versions of a tree that is not one."""
    names = sorted({c.pin.name for c in cands})
    example = next(iter(cands[0].pin.files.values())).path
    prefix = cands[0].pin.package_prefix
    if prefix and example.startswith(prefix):
        example = example[len(prefix) :]
    return (
        f"{seen.label}: --series auto: this is not an install of {' or '.join(names)}: no "
        f"{'/'.join(n.replace('-', '_') for n in names)}-*.dist-info and none of the files the shipped "
        f"series pin (such as {example}); --target names the folder that holds the package: a "
        "site-packages folder, or a source checkout's root"
    )


def pinned_to(spec, root: Path = SHIPPED, timeout: float | None = None, **target_options) -> str | None:
    """The name of the shipped series pinned to exactly what ``spec`` holds, or None where none
    is or the target cannot be read: the question a hint asks, never a refusal of its own."""
    cands = candidates(root)
    try:
        return choose(read_target(spec, cands, timeout, **target_options), cands).directory.name
    except PatchkitError:
        return None


def _choose_each(
    targets: list, root: Path, target_options: dict, timeout: float | None = None
) -> list[tuple[Seen, Candidate]]:
    cands = candidates(root)
    targets = expand_targets(targets, **target_options)  # k8s:NS/SELECTOR:ROOT: every pod
    out = []
    for spec in targets:
        seen = read_target(spec, cands, timeout, **target_options)
        out.append((seen, choose(seen, cands)))
    return out


def resolve_per_host(
    targets: list, root: Path = SHIPPED, timeout: float | None = None, **target_options
) -> tuple[list[str], str]:
    """(one series folder per target, in their order; the sentence saying what was chosen).

    A mixed fleet (hosts mid-upgrade) gets each host's own series; a host no shipped series
    matches refuses the whole run, as for one target.
    """
    chosen = _choose_each(targets, root, target_options, timeout)
    dirs = [str(c.directory) for _, c in chosen]
    if len(set(dirs)) == 1:
        return dirs, _said(chosen)
    per = ", ".join(f"{seen.label}: {c.directory.name} ({release(c.pin)})" for seen, c in chosen)
    return dirs, f"--series auto: a series per host: {per}"


def resolve(
    targets: list[str], root: Path = SHIPPED, timeout: float | None = None, **target_options
) -> tuple[str, str]:
    """(series folder, the sentence saying which one was chosen and why) for ``targets``; each
    target read within ``timeout`` seconds."""
    chosen = _choose_each(targets, root, target_options, timeout)
    names = {c.directory.name for _, c in chosen}
    if len(names) > 1:
        per = ", ".join(f"{seen.label}: {c.directory.name}" for seen, c in chosen)
        raise Refused(f"--series auto: the targets need different series ({per}); run them apart")
    return str(chosen[0][1].directory), _said(chosen)


def _said(chosen: list[tuple[Seen, Candidate]]) -> str:
    seen_all = [seen for seen, _ in chosen]
    c = chosen[0][1]
    files = ", ".join(Path(f).name for f in c.pin.files)
    if any(s.manifest for s in seen_all):
        return (
            f"--series auto: chose {c.directory.name} ({release(c.pin)}): "
            "the series patchkit applied to the target"
        )
    verb = "matches" if len(c.pin.files) == 1 else "match"
    return f"--series auto: chose {c.directory.name} ({release(c.pin)}): {files} {verb} its pin exactly"
