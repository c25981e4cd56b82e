"""Mutated patches never crash the parser or planner: a clean InvalidInput (exit 2) or a plan."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from patchkit import ops
from patchkit.engine.plan import plan_series
from patchkit.engine.series import load_series
from patchkit.engine.targetprog import compile_series
from patchkit.errors import InvalidInput
from support.engine import make_series, read_tree, write_tree

pytestmark = [pytest.mark.slow]

ORIG = b"".join(b"line %d\n" % i for i in range(1, 31))
GOOD = (
    b"diff --git a/m.py b/m.py\nindex 1111111..2222222 100644\n--- a/m.py\n+++ b/m.py\n"
    b"@@ -4,3 +4,4 @@ def f():\n line 4\n line 5\n+inserted\n line 6\n"
    b"@@ -20,3 +21,2 @@\n line 20\n-line 21\n line 22\n"
    b"diff --git a/new.py b/new.py\nnew file mode 100644\nindex 0000000..3333333\n"
    b"--- /dev/null\n+++ b/new.py\n@@ -0,0 +1,2 @@\n+a\n+b\n\\ No newline at end of file\n"
)

mutation = st.tuples(
    st.sampled_from(["drop", "dup", "swap", "byte", "insert"]), st.integers(0, 10_000), st.integers(0, 255)
)


def mutate(data: bytes, edits) -> bytes:
    lines = data.split(b"\n")
    for kind, pos, byte in edits:
        i = pos % len(lines)
        if kind == "drop" and len(lines) > 1:
            del lines[i]
        elif kind == "dup":
            lines.insert(i, lines[i])
        elif kind == "swap" and len(lines) > 1:
            j = (i + 1) % len(lines)
            lines[i], lines[j] = lines[j], lines[i]
        elif kind == "byte" and lines[i]:
            k = byte % len(lines[i])
            lines[i] = lines[i][:k] + bytes([byte]) + lines[i][k + 1 :]
        elif kind == "insert":
            lines.insert(i, bytes([byte]) * (byte % 4))
    return b"\n".join(lines)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(mutation, min_size=1, max_size=3))
def test_mutated_patches_fail_cleanly(tmp_path_factory, edits):
    work = tmp_path_factory.mktemp("fuzz")
    series = make_series(work / "s", {"m.py": ORIG}, [("0001.patch", mutate(GOOD, edits))])
    try:
        loaded = load_series(str(series))
        plan_series(loaded)
        compile_series(loaded)
    except InvalidInput as e:
        assert str(e) and "Traceback" not in str(e)
        return
    # Accepted: applying either refuses with the target untouched (exit 1), finds the series does
    # not fit its own pinned text (the target holds it: exit 2, "inconsistent"), or applies and
    # reverts exactly.
    root = work / "t"
    write_tree(root, {"m.py": ORIG})
    res = ops.apply(str(series), [str(root)])
    assert res.exit_code in (0, 1, 2), res.to_json()
    if res.exit_code == 2:
        assert "this series is inconsistent" in json.dumps(res.to_json()), res.to_json()
    if res.exit_code:
        assert read_tree(root, ["m.py", "new.py"]) == {"m.py": ORIG, "new.py": None}
    else:
        assert ops.revert(str(series), [str(root)]).exit_code == 0
        assert read_tree(root, ["m.py", "new.py"]) == {"m.py": ORIG, "new.py": None}
