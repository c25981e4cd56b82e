"""Terminal and JSON renderings of an operation's outcome (one table row per host)."""

from __future__ import annotations

import json
import time

from patchkit.boundary import RESULT_SCHEMA, error_json  # noqa: F401  (error_json: re-exported)
from patchkit.ops import OpResult

_VERDICT = {0: "ok", 1: "REFUSED", 2: "INVALID"}


# `--json` prints exactly one document on stdout, success or failure, with the same top-level
# keys (docs/tasks.md, "JSON output"); a new key is a minor change, a changed meaning a new schema.


def render_json(result: OpResult) -> str:
    doc = result.to_json()
    failed = next((h for h in result.hosts if h.exit_code == result.exit_code and h.exit_code), None)
    error = None
    if failed is not None:
        error = f"{failed.target}: {_first_error(failed, width=None) or failed.state}"
    doc.update(schema=RESULT_SCHEMA, error=error, proven=_proven_json(result))
    return json.dumps(doc, indent=2, sort_keys=True)


def _series_of(result: OpResult) -> dict[str, str]:
    """Series name -> digest, for every series the result holds (one, or a fleet's per host)."""
    per_host = getattr(result, "per_host", False)
    pairs = [(h.series, h.digest) for h in result.hosts] if per_host else [(result.series, result.digest)]
    return dict(sorted(pairs))


def _proven_json(result: OpResult) -> dict:
    """``proven``: how each series of the result is proven (patches/proofs.toml)."""
    from patchkit import proofs

    return {
        name: {**proofs.proof_of(name, digest).to_json(), "text": proofs.describe(name, digest)}
        for name, digest in _series_of(result).items()
    }


def _proven_lines(result: OpResult) -> list[str]:
    """patch.verify's "proven:" line(s): how its series is proven, per series in a mixed fleet."""
    from patchkit import proofs

    series = _series_of(result)
    if len(series) == 1 and not getattr(result, "per_host", False):
        return [f"proven: {proofs.describe(*next(iter(series.items())))}"]
    return [f"proven: {name}: {proofs.describe(name, digest)}" for name, digest in series.items()]


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for n, row in enumerate(rows):
        out.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def _first_error(host, width: int | None = 60) -> str:
    text = next((m for m in host.messages if m), "")
    if not text:
        bad = next((f for f in host.files if f.state not in ("ok", "pristine", "applied")), None)
        text = f"{bad.path}: {bad.state}" if bad else ""
    return text if width is None or len(text) <= width else text[: width - 1] + "…"


_IDENTITY_KEYS = ("start=", "boot=", "ns=", "machine=", "time=")


def _journal_line(entry: dict) -> str:
    when = entry.get("time")
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when)) if when is not None else "?"
    # the owner identity a takeover records (boot id, machine id...) stays in --json
    detail = " ".join(w for w in (entry.get("detail") or "").split() if not w.startswith(_IDENTITY_KEYS))
    rest = " ".join(filter(None, (entry.get("op"), entry.get("event"), entry.get("series"), detail)))
    return f"{stamp} {rest}"


def render_text(result: OpResult, verbose: bool = True) -> str:
    per_host = getattr(result, "per_host", False)
    if per_host:  # a mixed fleet: each row names its host's series
        names = sorted({h.series for h in result.hosts})
        lines = [f"patchkit {result.op}: a series per host ({', '.join(names)})"]
    else:
        lines = [f"patchkit {result.op}: series {result.series} ({result.digest[:12]})"]
    if result.op == "verify":
        lines += _proven_lines(result)
    rows = [
        ["target"] + (["series"] if per_host else []) + ["state", "files", "wrote", "time", "result", "error"]
    ]
    for h in result.hosts:
        error = _first_error(h) if h.exit_code else ""
        rows.append(
            [h.target]
            + ([f"{h.series} ({h.digest[:12]})"] if per_host else [])
            + [
                h.state,
                str(len(h.files)),
                str(len(h.written)),
                f"{h.elapsed:.2f}s",
                _VERDICT.get(h.exit_code, str(h.exit_code)),
                error,
            ]
        )
    lines.append(_table(rows))
    for h in result.hosts:
        detail = []
        if h.exit_code:  # why first: the files below are its consequences
            detail += [f"  {m}" for m in h.messages]
        for f in h.files:
            if verbose or f.state not in ("ok", "pristine", "applied"):
                head = f.detail
                if f.hunks:  # one line per hunk, in the file's line order
                    head = head[: len(head) - len("; ".join(f.hunks))].rstrip("; ")
                detail.append(
                    f"  {f.path}: {f.state}"
                    + (f" — {head}" if head else "")
                    + (";" if f.hunks and head else "")
                )
                detail += [f"    {hunk}" for hunk in f.hunks]
        if h.written:
            detail.append("  wrote: " + ", ".join(h.written))
        else:
            detail.append("  wrote nothing")
        if not h.exit_code:
            detail += [f"  {m}" for m in h.messages]
        if h.journal:
            detail.append("  journal:")
            detail += [f"    {_journal_line(j)}" for j in h.journal]
        if detail:
            lines.append(f"{h.target}:")
            lines += detail
    return "\n".join(lines)
