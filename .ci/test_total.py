"""`make test`'s last line: the passes' counts summed, read from each pass's junit XML.

    python .ci/test_total.py PASS1.xml PASS2.xml ...

prints one line, e.g. ``make test: 2356 passed, 1 failed, 12 skipped over 2 passes in 8 min 12 s
(pass 1: 2076 passed, 1 failed, 4 skipped in 4 min 14 s; pass 2: 280 passed, 8 skipped in
3 min 58 s)``. A pass that wrote no XML (pytest ended before its summary) is named as such.
Standard library only: it runs under any Python. Exit 0 always; `make test`'s own exit status
is the passes' (this line only says what they did).
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

KINDS = ("passed", "failed", "errors", "skipped")


@dataclass
class Counts:
    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    seconds: float = 0.0

    def add(self, other: Counts) -> None:
        for kind in (*KINDS, "seconds"):
            setattr(self, kind, getattr(self, kind) + getattr(other, kind))

    def words(self) -> str:
        """``2076 passed, 1 failed, 4 skipped``: passed always, the others where not 0."""
        said = [f"{self.passed} passed"]
        said += [f"{getattr(self, kind)} {kind}" for kind in KINDS[1:] if getattr(self, kind)]
        return ", ".join(said)


def read_junit(path: Path) -> Counts:
    """One pass's counts: pytest's junit XML (<testsuites><testsuite tests= failures= errors=
    skipped= time=>); passed is what is left of tests (an xfail counts as skipped there)."""
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    counts = Counts()
    for suite in suites:
        number = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
        counts.add(
            Counts(
                passed=number["tests"] - number["failures"] - number["errors"] - number["skipped"],
                failed=number["failures"],
                errors=number["errors"],
                skipped=number["skipped"],
                seconds=float(suite.get("time", 0)),
            )
        )
    return counts


def duration(seconds: float) -> str:
    whole = round(seconds)
    return f"{whole // 60} min {whole % 60} s" if whole >= 60 else f"{whole} s"


def total_line(paths: list[Path]) -> str:
    total = Counts()
    parts, missing = [], 0
    for n, path in enumerate(paths, 1):
        try:
            counts = read_junit(path)
        except (OSError, ET.ParseError):
            parts.append(f"pass {n}: no result (it ended before writing {path.name})")
            missing += 1
            continue
        total.add(counts)
        parts.append(f"pass {n}: {counts.words()} in {duration(counts.seconds)}")
    line = f"make test: {total.words()} over {len(paths)} passes in {duration(total.seconds)}"
    if missing:
        line += f" ({missing} without a result)"
    return f"{line} ({'; '.join(parts)})"


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python .ci/test_total.py PASS.xml ...", file=sys.stderr)
        return 2
    print(total_line([Path(a) for a in argv]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
