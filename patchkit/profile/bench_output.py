"""Numbers from a serving benchmark's text output (sglang.bench_serving and look-alikes).

sglang.bench_serving ends with a block of ``Label (unit):   value`` lines between ``=`` rules
("Output token throughput (tok/s):", "Accept length:", "Mean TTFT (ms):", ...). The parser
reads every ``label: number`` line anywhere in the text (so progress bars, warnings and log
lines around the block do no harm), keys them by a normalised label, and keeps the last value
when a label repeats (a warm-up run printed first, the measured run last). It never fails:
what it cannot find is None.

    parsed = parse_bench_output(text)
    parsed.tokens_per_s, parsed.accept_length, parsed.metrics["mean ttft (ms)"]
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

# "Label words (unit):   1,234.56" -- label starts with a letter, no ':' inside; the value may
# carry thousands separators, a sign, an exponent, and a trailing unit or '%'.
_METRIC_LINE = re.compile(
    r"^\s*(?P<label>[A-Za-z][^:=\n]*?)\s*[:=]\s*"
    r"(?P<value>[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?(?:[eE][-+]?\d+)?)"
    r"\s*(?P<unit>[A-Za-z/%]*(?:/s)?)\s*$"
)
_RESULT_BANNER = re.compile(r"=+\s*(serving )?benchmark result\s*=+", re.I)

# Label patterns (normalised: lower case, single spaces) for the numbers the report uses.
# The first pattern that matches a label wins; "peak"/"total"/"input" throughputs are other
# numbers and must not be taken for the output throughput.
OUTPUT_THROUGHPUT = (
    r"output token throughput\b.*",
    r"output throughput\b.*",
    r"output tokens? per second\b.*",
    r"(?:decode|generation) throughput\b.*",
)
ACCEPT_LENGTH = (
    r"(?:mean |average |avg )?accept(?:ed)? length\b.*",
    r"(?:mean |average )?acceptance length\b.*",
    r"accept len\b.*",
)
REQUEST_THROUGHPUT = (r"request throughput\b.*",)
DURATION = (r"benchmark duration\b.*", r"duration\b.*")
COMPLETED = (r"successful requests\b.*", r"completed requests\b.*")


def normalise_label(label: str) -> str:
    return " ".join(label.lower().split())


@dataclass
class BenchOutput:
    metrics: dict = field(default_factory=dict)  # normalised label -> last value
    result_blocks: int = 0  # "Serving Benchmark Result" banners seen
    tokens_per_s: float | None = None
    accept_length: float | None = None
    request_throughput: float | None = None
    duration_s: float | None = None
    completed: float | None = None

    def to_dict(self) -> dict:
        return {
            "tokens_per_s": self.tokens_per_s,
            "accept_length": self.accept_length,
            "request_throughput": self.request_throughput,
            "duration_s": self.duration_s,
            "completed": self.completed,
            "result_blocks": self.result_blocks,
            "metrics": dict(self.metrics),
        }

    def write(self, directory: Path) -> None:
        """benchmark.json in a run (or point) directory."""
        (directory / "benchmark.json").write_text(
            json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8"
        )

    def report_meta(self, where: str) -> dict[str, float | str]:
        """The report's benchmark keys: tokens_per_s and accept_length where found, and a
        ``benchmark`` line of facts (``where``: the output's name, for the "no throughput" note)."""
        meta: dict[str, float | str] = {}
        if self.tokens_per_s is not None:
            meta["tokens_per_s"] = self.tokens_per_s
        if self.accept_length is not None:
            meta["accept_length"] = self.accept_length
        facts = [
            f"{self.completed:g} requests" if self.completed is not None else None,
            f"{self.duration_s:g} s" if self.duration_s is not None else None,
            f"{self.request_throughput:g} req/s" if self.request_throughput is not None else None,
        ]
        meta["benchmark"] = (", ".join(f for f in facts if f) or "no result lines found") + (
            "" if self.tokens_per_s is not None else f"; no 'Output token throughput' line in {where}"
        )
        return meta


def _pick(metrics: dict, patterns) -> float | None:
    for pattern in patterns:
        for label, value in metrics.items():
            if re.fullmatch(pattern, label):
                return value
    return None


def parse_bench_output(text: str) -> BenchOutput:
    """Every ``label: number`` line of ``text``; the well-known ones as attributes."""
    out = BenchOutput()
    for raw in text.replace("\r", "\n").splitlines():
        if _RESULT_BANNER.search(raw):
            out.result_blocks += 1
            continue
        match = _METRIC_LINE.match(raw)
        if not match:
            continue
        label = normalise_label(match.group("label"))
        try:
            value = float(match.group("value").replace(",", ""))
        except ValueError:
            continue
        out.metrics.pop(label, None)  # re-insert: dict order = order of last appearance
        out.metrics[label] = value
    peak = [label for label in out.metrics if label.startswith(("peak ", "max ", "total "))]
    usable = {k: v for k, v in out.metrics.items() if k not in peak}
    out.tokens_per_s = _pick(usable, OUTPUT_THROUGHPUT)
    out.accept_length = _pick(usable, ACCEPT_LENGTH)
    out.request_throughput = _pick(usable, REQUEST_THROUGHPUT)
    out.duration_s = _pick(usable, DURATION)
    out.completed = _pick(usable, COMPLETED)
    return out
