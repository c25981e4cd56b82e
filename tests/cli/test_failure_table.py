"""The failure tables ("What every failure prints") say what the program prints.

Every row of the two tables (invalid input, exit 2; refused, exit 1) is read from docs/tasks.md
(README.md's until the docs split), and its backticked lines are matched against
what the real CLI prints when that failure is made here, on small local trees (no sshd, no
wheels). In a table line, `…` stands for any text and R, D, T, N, S, P, FILE, PATCH, PREFIX, DIR,
LINE and <…> for a value. A row this file does not make says why (UNTRIGGERED), and a table row
this file has never heard of fails, so the table and the program cannot drift apart silently.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from support.cli import patchkit_command
from support.engine import make_series, write_tree
from support.failures import GOOD, ORIG, REPO, invoke, small_series, small_target

TABLES = REPO / "docs" / "tasks.md"
PLACEHOLDER = r"<[^>]+>|…|\b(?:R|D|T|N|S|P|FILE|PATCH|PREFIX|DIR|LINE)\b"


def _cells(line: str) -> list[str]:
    """A table row's cells ('|' inside backticks is text)."""
    cells, cell, code = [], "", False
    for ch in line.strip().strip("|"):
        if ch == "`":
            code = not code
        if ch == "|" and not code:
            cells.append(cell.strip())
            cell = ""
        else:
            cell += ch
    return [*cells, cell.strip()]


def failure_rows() -> dict[str, list[str]]:
    """cause -> the backticked lines of its second cell, for both tables of the section."""
    text = TABLES.read_text(encoding="utf-8")
    start = text.index("## What every failure prints")
    end = text.index("\nDone (exit 0)", start)
    rows = {}
    for line in text[start:end].splitlines():
        if not line.startswith("|") or line.startswith("|---"):
            continue
        cause, says = _cells(line)[:2]
        if cause != "cause":
            rows[cause] = re.findall(r"`([^`]+)`", says)
    return rows


def pattern(template: str, subs: dict[str, str]) -> str:
    """A table line as a regex: placeholders match a value, ``subs`` swap the table's example
    values (a path, a line number) for the ones of the run here."""
    keys = "|".join(rf"(?<!\w){re.escape(k)}(?!\w)" for k in sorted(subs, key=len, reverse=True))
    out = []
    for piece in re.split(f"({keys + '|' if keys else ''}{PLACEHOLDER})", template):
        if piece in subs:
            out.append(re.escape(subs[piece]))
        elif piece and re.fullmatch(PLACEHOLDER, piece):
            out.append(".*" if piece == "…" else ".+?")
        else:
            out.append(re.escape(piece))
    return "".join(out)


def test_pattern():
    assert re.search(pattern("cannot write to R (x); nothing", {}), "  cannot write to /t (x); nothing")
    assert re.search(pattern("`a` FILE: d — wc -l …, p", {}), "`a` pkg/m.py: d — wc -l 21, p")
    assert not re.search(pattern("target R is", {}), "target\nR is")
    assert re.search(pattern("/srv/a twice", {"/srv/a": "/tmp/x"}), "/tmp/x twice")
    assert not re.search(pattern("to R (", {"R/D": "/a/b", "R": "/a"}), "to /a/b (")
    assert re.search(pattern("to R/D (Read", {"R/D": "/a/b", "R": "/a"}), "to /a/b (Read")


# -- making each failure ----------------------------------------------------------------------------


@dataclass
class Made:
    output: str  # what the runs printed, stdout and stderr
    subs: dict[str, str] = field(default_factory=dict)
    # table lines of the row that this run does not print, each with why
    not_made: dict[str, str] = field(default_factory=dict)


def _run(*args, cwd=REPO, expect=None) -> str:
    proc = invoke(*args, cwd=cwd)
    if expect is not None:
        assert proc.returncode == expect, proc.stdout + proc.stderr
    return proc.stdout + proc.stderr


def _patchkit(args, cwd: Path) -> str:
    """The installed command's Program (python -m patchkit.command) in ``cwd``."""
    proc = patchkit_command(args, cwd, config_home=cwd / "no-config")
    return proc.stdout + proc.stderr


def _read_only(mount: Path, *args) -> str:
    """The CLI with ``mount`` bind-mounted read-only in a private mount namespace (root ignores
    permission bits: a read-only mount is the honest read-only target here)."""
    import shlex

    if subprocess.run(["unshare", "-m", "--", "true"], capture_output=True).returncode != 0:
        pytest.skip("cannot make a read-only mount here (unshare -m)")
    script = (
        f"mount --bind {mount} {mount} && mount -o remount,ro,bind {mount} && "
        f"exec {sys.executable} -m invoke {' '.join(shlex.quote(a) for a in args)}"
    )
    proc = subprocess.run(
        ["unshare", "-m", "--", "sh", "-c", script],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": str(mount.parent)},
    )
    return proc.stdout + proc.stderr


def _bad_option(tmp, tree, series):
    return Made(_run("patch.apply", "--series", series, "--target", tree, "--jobs", "abc", expect=2))


def _empty_value(tmp, tree, series):
    return Made(_run("patch.apply", "--series", "", "--target", tree, expect=2))


def _parse_error(tmp, tree, series):
    out = _patchkit(["patch.apply", "--series", series, "--target", tree, "--jobz", "3"], tmp)
    prose = "a name in the prose"
    return Made(out, not_made={"invoke": prose, "patchkit.boundary.program_class()": prose})


def _config_value(tmp, tree, series):
    config = tmp / "invoke.yaml"
    config.write_text("patchkit:\n  timeout: -5\n")
    out = _run("-f", str(config), "patch.apply", "--series", series, "--target", tree, expect=2)
    return Made(out, {"/srv/invoke.yaml": str(config)}, {"patchkit: --timeout": "prose: 'becomes'"})


def _on_off_value(tmp, tree, series):
    config = tmp / "invoke.yaml"
    config.write_text('patchkit:\n  keep_journal: "yes please"\n')
    out = _run("-f", str(config), "patch.revert", "--series", series, "--target", tree, expect=2)
    return Made(out, {"/srv/invoke.yaml": str(config)})


def _unknown_key(tmp, tree, series):
    config = tmp / "invoke.yaml"
    config.write_text("patchkit:\n  jobz: 3\n")
    out = _run("-f", str(config), "patch.apply", "--series", series, "--target", tree, expect=2)
    return Made(out, {"/srv/invoke.yaml": str(config)})


def _unknown_section(tmp, tree, series):
    (tmp / "patchkit.yaml").write_text("patchkt:\n  series: x\n")
    out = _patchkit(["patch.apply", "--series", series, "--target", tree], tmp)
    prose = "a file named in the prose"
    return Made(
        out,
        {"/srv/patchkit.yaml": str(tmp / "patchkit.yaml")},
        {"~/.invoke.yaml": prose, "/etc/invoke.yaml": prose},
    )


def _no_series_no_target(tmp, tree, series):
    (tmp / "patchkit.yaml").write_text("patchkit:\n  jobs: 2\n")
    out = _patchkit(["patch.apply", "--target", tree], tmp) + _patchkit(
        ["patch.apply", "--series", series], tmp
    )
    (tmp / "patchkit.yaml").unlink()
    out += _patchkit(["patch.apply", "--target", tree], tmp)
    return Made(out, {"/srv/patchkit.yaml": str(tmp / "patchkit.yaml")})


def _missing_folder_or_file(tmp, tree, series):
    return Made(
        _run("patch.apply", "--series", series, "--target", tree, "--ssh-config", "/x", expect=2)
        + _run("patch.new", "0002.patch", "--series", series, "--edited", "/x", expect=2)
        + _run("profile.run", "--out", "/proc/x", expect=2)
    )


def _series_folder(tmp, tree, series):
    (tmp / "empty").mkdir()
    return Made(
        _run("patch.apply", "--series", str(tmp / "none" / "s"), "--target", tree, expect=2)
        + _run("patch.apply", "--series", str(tmp / "empty"), "--target", tree, expect=2),
        {"DIR": str(tmp / "none" / "s")},
    )


LONG = b"".join(b"line %d\n" % i for i in range(1, 121))


def _series_with(tmp, name: str, patch: bytes) -> tuple[str, str]:
    tree = tmp / "long"
    write_tree(tree, {"pkg/m.py": LONG})
    return str(make_series(tmp / "bad", {"pkg/m.py": LONG}, [(name, patch)])), str(tree)


def _hunk_counts(tmp, tree, series):
    patch = (
        b"diff --git a/pkg/m.py b/pkg/m.py\n--- a/pkg/m.py\n+++ b/pkg/m.py\n"
        b"@@ -4,3 +4,4 @@\n line 4\n line 5\n+inserted\n line 6\n@@ -105,6 +105,9 @@\n"
        + b"".join(b" line %d\n" % i for i in (105, 106, 107))
        + b"+new\n"
        + b"".join(b" line %d\n" % i for i in (108, 109, 110))
    )
    bad, target = _series_with(tmp, "0002.patch", patch)
    return Made(_run("patch.apply", "--series", bad, "--target", target, expect=2))


def _text_after(tmp, tree, series):
    bad, target = _series_with(tmp, "0002.patch", GOOD + b"\n" * 31 + b"Z" * 300 + b"\n")
    return Made(_run("patch.apply", "--series", bad, "--target", target, expect=2))


def _bad_target_spec(tmp, tree, series):
    return Made(
        _run("patch.apply", "--series", series, "--target", "docker://c", expect=2)
        + _run("patch.apply", "--series", series, "--target", tree, "--container", "a b", expect=2)
        + _run("patch.apply", "--series", series, "--target", tree, "--exec", "'x", expect=2)
    )


def _twice(tmp, tree, series):
    out = _run("patch.apply", "--series", series, "--target", tree, "--target", tree + "/", expect=2)
    return Made(out, {"/srv/a": tree})


def _bad_inventory(tmp, tree, series):
    (tmp / "hosts.ini").write_text("[gpu\n")
    return Made(_run("patch.apply", "--series", series, "--inventory", str(tmp / "hosts.ini"), expect=2))


def _limit(tmp, tree, series):
    return Made(_run("patch.apply", "--series", series, "--target", tree, "--limit", "gpu", expect=2))


def _inconsistent(tmp, tree, series):
    """0001 inserts two lines, 0002 counts on three: a series that does not fit its pinned text;
    and a pin whose line count contradicts its sha256."""
    head = b"diff --git a/pkg/m.py b/pkg/m.py\n--- a/pkg/m.py\n+++ b/pkg/m.py\n"
    first = head + b"@@ -4,3 +4,5 @@\n line 4\n line 5\n+one\n+two\n line 6\n"
    second = (
        head
        + b"@@ -13,3 +13,4 @@\n line 10\n line 11\n+three\n line 12\n"
        + b"@@ -19,3 +20,4 @@\n line 16\n line 17\n+four\n line 18\n"
    )
    broken = make_series(tmp / "broken", {"pkg/m.py": ORIG}, [("0001.patch", first), ("0002.patch", second)])
    pin = small_series(tmp / "pin")
    (pin / "pin.toml").write_text((pin / "pin.toml").read_text().replace("lines = 20", "lines = 21"))
    return Made(
        _run("patch.apply", "--series", str(broken), "--target", tree, expect=2)
        + _run("patch.verify", "--series", str(broken), "--target", tree, expect=2)
        + _run("patch.apply", "--series", str(pin), "--target", tree, expect=2)
    )


def _edited_verify(tmp, tree, series):
    _run("patch.apply", "--series", series, "--target", tree, expect=0)
    (Path(tree) / "pkg" / "m.py").write_bytes(b"edited by hand\n")
    return Made(
        _run("patch.verify", "--series", series, "--target", tree, expect=1)
        + _run("patch.check", "--series", series, "--target", tree, expect=1)
    )


def _drift(tmp, tree, series):
    moved = small_target(tmp / "moved")
    (moved / "pkg" / "m.py").write_bytes(b"top\n" + ORIG)
    changed = small_target(tmp / "changed")
    (changed / "pkg" / "m.py").write_bytes(ORIG.replace(b"line 5\n", b"line five\n"))
    return Made(
        _run("patch.apply", "--series", series, "--target", str(moved), expect=1)
        + _run("patch.apply", "--series", series, "--target", str(changed), expect=1)
    )


def _wrapper(tmp, tree, series):
    out = _run(
        "patch.apply", "--series", series, "--target", tree, "--exec", "sh -c 'echo no such pod >&2; exit 1'"
    )
    return Made(out)


def _prefix(tmp, tree, series):
    out = _run(
        "patch.apply", "--series", series, "--target", tree, "--exec", "env PATH=/nonexistent", expect=1
    )
    return Made(out, {"126/127": "127"})


def _ssh(tmp, tree, series):
    out = _run("patch.apply", "--series", series, "--target", "ssh://127.0.0.1:1/srv/x", expect=1)
    others = "needs an sshd that misbehaves (tests/faults/test_ssh_faults.py, sshd)"
    return Made(
        out,
        not_made={
            "T: unknown host (not in DNS or ssh_config): …": "needs a resolver that answers (no network here)",
            "T: SSH permission denied (…); …": others,
            "T: ssh failed (exit 255, connection problem): …": others,
            "T: no answer within S s": others,
        },
    )


def _no_root(tmp, tree, series):
    return Made(_run("patch.apply", "--series", series, "--target", str(tmp / "absent"), expect=1))


def _locked(tmp, tree, series):
    (Path(tree) / ".patchkit").mkdir()
    line = f"pid=1 host={os.uname().nodename} user=someone op=apply time={int(time.time()) - 5}\n"
    (Path(tree) / ".patchkit" / "lock").write_text(line)
    return Made(_run("patch.apply", "--series", series, "--target", tree, expect=1))


def _edited_after_apply(tmp, tree, series):
    _run("patch.apply", "--series", series, "--target", tree, expect=0)
    (Path(tree) / "pkg" / "m.py").write_bytes(b"edited by hand\n")
    return Made(_run("patch.apply", "--series", series, "--target", tree, expect=1))


def _edited_revert(tmp, tree, series):
    _run("patch.apply", "--series", series, "--target", tree, expect=0)
    (Path(tree) / "pkg" / "m.py").write_bytes(b"edited by hand\n")
    return Made(_run("patch.revert", "--series", series, "--target", tree, expect=1))


def _read_only_verify(tmp, tree, series):
    return Made(_read_only(Path(tree), "patch.verify", "--series", series, "--target", tree))


def _read_only_apply(tmp, tree, series):
    other = small_target(tmp / "other")  # its root writable, the folder of pkg/m.py not
    return Made(
        _read_only(Path(tree), "patch.apply", "--series", series, "--target", tree)
        + _read_only(other / "pkg", "patch.apply", "--series", series, "--target", str(other)),
        {"R/D": str(other / "pkg"), "R": tree},
    )


def _none_pinned(tmp, tree, series):
    other = tmp / "other"
    write_tree(other, {"lib/other.py": b"x = 1\n"})
    return Made(
        _run("patch.apply", "--series", series, "--target", str(other), expect=1),
        {"R": str(other)},
        {
            "none of the pinned files exists under R (checked: …); the shipped transformers-v5.17.0 is "
            "pinned to exactly these files: pass --series auto (or --series transformers-v5.17.0)": "needs "
            "the pinned transformers wheel (tests/cli/test_series_list.py, marked wheels)"
        },
    )


def _fleet(tmp, tree, series):
    drifted = small_target(tmp / "drifted")
    (drifted / "pkg" / "m.py").write_bytes(b"top\n" + ORIG)
    # one job: the good host stages before the drifted one is refused
    args = ("--target", tree, "--target", str(drifted), "--jobs", "1")
    return Made(_run("patch.apply", "--series", series, *args, expect=1))


MAKE: dict[str, Callable[..., Made]] = {
    "a bad option value (every option of every task, e.g. `--jobs abc`, `--timeout -5`, `--layout x`)": _bad_option,
    "an empty value, for any option of any task": _empty_value,
    "the same from a config file": _config_value,
    'an on/off setting spelled otherwise (`keep_journal: "yes please"`)': _on_off_value,
    "a `patchkit.*` key patchkit does not know": _unknown_key,
    "a top-level section that is neither `patchkit` nor invoke's own (`run`, `tasks`, …)": _unknown_section,
    "invoke cannot parse the command line (`--jobz`)": _parse_error,
    "no series / no target": _no_series_no_target,
    "a missing folder or file option": _missing_folder_or_file,
    "series folder": _series_folder,
    "a hunk header whose counts its body does not fill": _hunk_counts,
    "text after the last hunk": _text_after,
    "a bad target spec": _bad_target_spec,
    "one target twice in a fleet": _twice,
    "a bad inventory": _bad_inventory,
    "`--limit`/`--root` without `--inventory`": _limit,
    "a series that does not fit its own pinned text (apply, verify: the target's file has the "
    "pinned sha256 and `wc -l`, and a hunk still does not match)": _inconsistent,
    "drift": _drift,
    "a wrapper that failed (no such container, pod not found, any `--exec` prefix)": _wrapper,
    "a prefix that could not start the shell": _prefix,
    "SSH": _ssh,
    "the root is missing": _no_root,
    "locked": _locked,
    "a file edited after apply (apply)": _edited_after_apply,
    "the same (revert)": _edited_revert,
    "the same (check, verify)": _edited_verify,
    "read-only tree (verify)": _read_only_verify,
    "read-only tree (apply)": _read_only_apply,
    "a fleet host failed": _fleet,
    "none of the series' pinned files on the target (the default sglang series on a transformers tree)": _none_pinned,
}
UNTRIGGERED = {
    "other malformed patches": "prose: the rows above and docs/formats.md (tests/engine/test_diffparse*.py)",
    "another release installed": "needs a real sglang wheel "
    "(test_failures.py::test_wrong_release_says_installed_and_pinned_first, marked wheels)",
    "`--series auto` finds no series": "prose (tests/engine/test_autoseries.py, wheels)",
}


def test_every_row_is_made_or_says_why():
    rows = failure_rows()
    assert len(rows) > 20
    assert set(rows) == set(MAKE) | set(UNTRIGGERED), "docs/tasks.md rows and this file's differ"


@pytest.mark.parametrize("cause", sorted(MAKE))
def test_the_row_says_what_the_program_prints(tmp_path, cause):
    rows = failure_rows()
    tree, series = small_target(tmp_path / "target"), small_series(tmp_path / "series")
    made = MAKE[cause](tmp_path, str(tree), str(series))
    assert rows[cause], f"docs/tasks.md row {cause!r} shows no line"
    for template in rows[cause]:
        if template in made.not_made:
            continue
        assert re.search(pattern(template, made.subs), made.output), (
            f"docs/tasks.md row {cause!r} says `{template}`; the program printed:\n{made.output}"
        )
    assert set(made.not_made) <= set(rows[cause]), "not_made names a line the row does not have"
