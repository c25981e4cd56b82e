"""The typed target protocol: known answer lines, flags as an enum, unknown lines refused.

The target program (patchkit/engine/target.sh) answers with "@pk ..." lines. Every line it can
print must parse; any other "@pk" line is a protocol error naming the line: the real engine
run on a real target with a program that prints one extra line is refused, exit 1, the target
left byte-identical.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from patchkit import ops
from patchkit.engine import targetprog
from patchkit.engine.answer import Flag, Manifest, ProtocolError, parse_answer
from patchkit.engine.host_result import HostState
from patchkit.errors import EXIT_REFUSED
from support.engine import make_series, read_tree, write_tree

TARGET_SH = Path(targetprog.__file__).with_name("target.sh")


def test_every_fixed_line_the_program_prints_is_known():
    """Each ``pk_out "..."`` of target.sh without a variable parses (flags as Flag)."""
    fixed = [
        m.group(1)
        for m in re.finditer(r'pk_out "([^"$]*)"', TARGET_SH.read_text())
        if m.group(1).strip() != "enddump"
    ]  # closes a dump (read with the dump)
    assert len(fixed) >= 10
    for line in fixed:
        ans = parse_answer(b"@pk " + line.encode() + b"\n")
        for flag in ans.flags:
            assert isinstance(flag, Flag)
    flags = {f for line in fixed for f in parse_answer(b"@pk " + line.encode() + b"\n").flags}
    assert flags == set(Flag)  # no flag the program never prints, none missing


def test_known_lines_become_typed_fields():
    ans = parse_answer(
        b"noise\n@pk files ok\n@pk manifest applied sglang-v0.5.9 abc123 2\n"
        b"@pk commit failed in /t/x.py; rolling back\n@pk rolled back\n"
    )
    assert ans.flags == {Flag.FILES_OK, Flag.ROLLED_BACK}
    assert ans.manifest == Manifest("applied", "sglang-v0.5.9", "abc123", 2)
    assert ans.manifest.digest == "abc123" and ans.manifest.file_count == 2
    assert ans.commit_failed == "/t/x.py; rolling back"
    assert "files ok" in ans.flags  # the plain string still matches


@pytest.mark.parametrize("line", [b"@pk files okay", b"@pk all good", b"@pk rolled-back", b"@pk \xff\xfe"])
def test_an_unknown_line_is_a_protocol_error_naming_it(line):
    with pytest.raises(ProtocolError) as exc:
        parse_answer(b"@pk layout checkout\n" + line + b"\n")
    assert exc.value.exit_code == EXIT_REFUSED
    shown = line.decode("utf-8", "backslashreplace")
    assert repr(shown) in str(exc.value)
    assert "\n" not in str(exc.value)


def test_the_engine_refuses_a_target_answer_it_does_not_know(tmp_path, monkeypatch):
    base = {"f.txt": b"a\nb\nc\n"}
    patch = b"--- a/f.txt\n+++ b/f.txt\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"
    series = make_series(tmp_path / "s", base, [("p.patch", patch)])
    root = tmp_path / "t"
    write_tree(root, base)
    # A program from another patchkit version: the real target program, plus one line.
    real = targetprog.build_program

    def other_version(*args, **kwargs):
        return real(*args, **kwargs).replace(b"\n", b"\nprintf '@pk shiny new thing\\n'\n", 1)

    monkeypatch.setattr(ops, "build_program", other_version)
    res = ops.verify(str(series), [str(root)])
    assert res.exit_code == EXIT_REFUSED
    msg = res.hosts[0].messages
    assert any("unknown line: '@pk shiny new thing'" in m and "patch.status" in m for m in msg), msg
    assert read_tree(root, base.keys()) == base
    # apply: the program ran before its answer was read; the client says it cannot tell
    res = ops.apply(str(series), [str(root)])
    assert res.exit_code == EXIT_REFUSED and res.hosts[0].state != HostState.APPLIED
    monkeypatch.setattr(ops, "build_program", real)
    st = ops.status(str(series), [str(root)])
    assert st.hosts[0].state == HostState.APPLIED == "applied"
    assert ops.revert(str(series), [str(root)]).exit_code == 0
    assert read_tree(root, base.keys()) == base
