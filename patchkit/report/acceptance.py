"""How many draft tokens each request accepted: histogram, per-position rates, two means.

The records carry, per decode cycle, the accepted draft tokens of every request in the batch:

- SGLang v1 (EAGLEWorker): ``accepted_per_req``, the host list upstream already builds
  (``accepted`` is its sum); in every cycle, timed or not.
- SGLang v2 (EAGLEWorkerV2): ``tokens``, the per-request committed tokens (accepted + the bonus
  token), a device tensor read with the cycle's device times: in timed cycles only.
- transformers' assisted generation: ``accepted`` and ``drafted`` (one request per cycle) and
  ``prefill`` on the first cycle of each generate() call.

Two means, named, because they disagree and can flip a comparison (vLLM #42508):

- ``pooled``: tokens per request per verify step, pooled over every (request, step): what
  a throughput sees; long requests weigh more.
- ``per_request``: each request's own mean, averaged over requests (what SpecForge reports).
  It needs to know which steps belong to one request: the transformers records do (one
  request per generate() call, batch 1); SGLang's records do not name requests, so there it is
  None with the reason.

Acceptance length = 1 + accepted draft tokens (the bonus token of a verify step counts).
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from typing import TypeGuard

# the server flags that fix the draft shape, as SGLang's launch_server spells them
SPEC_FLAGS = {
    "--speculative-algorithm": "algorithm",
    "--speculative-num-steps": "num_steps",
    "--speculative-eagle-topk": "topk",
    "--speculative-num-draft-tokens": "num_draft_tokens",
}
DRIFT_BINS = 5
# SGLang 0.5.12+: num-steps chosen at run time from the acceptance seen (adaptive_spec_params)
ADAPTIVE_FLAG = "--speculative-adaptive"


def spec_from_argv(argv: Iterable[str] | str | None) -> dict:
    """num_steps, topk, num_draft_tokens (ints) and algorithm from a command line (a list or
    a string): what the server was asked for. Absent flags are left out."""
    if not argv:
        return {}
    words = shlex.split(argv) if isinstance(argv, str) else [str(w) for w in argv]
    out: dict = {}
    for i, word in enumerate(words):
        flag, eq, value = word.partition("=")
        if flag == ADAPTIVE_FLAG:  # SGLang picks num-steps per batch at run time
            out["adaptive"] = not eq or value.lower() not in ("false", "0", "no", "off")
            continue
        key = SPEC_FLAGS.get(flag)
        if key is None:
            continue
        if not eq:
            if i + 1 >= len(words):
                continue
            value = words[i + 1]
        if key == "algorithm":
            out[key] = value
            continue
        try:
            out[key] = int(value)
        except ValueError:
            continue
    return out


def server_spec(headers: Iterable[dict], meta: dict) -> dict:
    """The draft shape a run was started with: the flags in the first lead-rank header's argv
    that has any (a TP rank started by multiprocessing's spawn keeps its parent's argv), each
    missing one from the server command in the report's meta."""
    spec: dict = {}
    for header in headers:
        spec = spec_from_argv(header.get("argv"))
        if spec:
            break
    command = meta.get("server_command") or meta.get("server command")
    return {**spec_from_argv(command), **spec} if isinstance(command, str) else spec


def request_accepts(attrs: dict) -> tuple[list[int], list[int] | None] | None:
    """(accepted draft tokens per request, drafted tokens per request or None) of one decode
    cycle's attrs, or None when the cycle carries no per-request acceptance."""
    per_req = attrs.get("accepted_per_req")
    if isinstance(per_req, list) and all(isinstance(v, int) for v in per_req):
        return list(per_req), None
    if _one_request(per_req, attrs):
        return [per_req], None
    acc = attrs.get("accepted")
    if isinstance(acc, list) and all(isinstance(v, int) for v in acc):
        return list(acc), None
    tok = attrs.get("tokens")
    if isinstance(tok, list) and all(isinstance(v, int) for v in tok):
        return [max(0, v - 1) for v in tok], None
    if _one_request(tok, attrs):
        # the runtime writes a one-element tensor as its number: one request's committed tokens
        return [max(0, tok - 1)], None
    drafted = attrs.get("drafted")
    if isinstance(acc, int) and isinstance(drafted, int) and attrs.get("batch_size", 1) == 1:
        return [acc], [drafted]
    return None


def _one_request(value: object, attrs: dict) -> TypeGuard[int]:
    """A per-request count written as a plain number: an int in a cycle of batch size 1."""
    return isinstance(value, int) and not isinstance(value, bool) and attrs.get("batch_size") == 1


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def acceptance(cycles: list[dict], spec: dict | None = None, drift_bins: int = DRIFT_BINS) -> dict | None:
    """summary.json's ``acceptance`` from the decode cycles of one rank (in cycle order).

    Keys: num_steps (the flag, else the most drafted / accepted seen: ``num_steps_source``),
    cycles_with_acceptance, decode_cycles, request_steps, histogram (counts of request steps
    by accepted draft tokens, index = tokens), position_rate (k = 1..num_steps: accepted at
    position k among the request steps that drafted k), conditional_rate (accepted at k among
    those that accepted k - 1 and drafted k), mean_accept_length {pooled, per_request,
    per_request_note}, by_batch_size [{batch_size, request_steps, pooled}], over_run [{bin,
    first_cycle, last_cycle, request_steps, pooled}], drift (last bin minus first, tokens)."""
    spec = dict(spec or {})
    rows: list[tuple[dict, list[int], list[int] | None]] = []
    for c in cycles:
        got = request_accepts(c.get("attrs") or {})
        if got is not None and got[0]:
            rows.append((c, got[0], got[1]))
    if not rows:
        return None
    num_steps, source = _num_steps(spec, rows)
    top = max(num_steps, max(max(acc) for _, acc, _ in rows))
    hist, reached, offered, by_bs = _counts(rows, num_steps, top)
    steps = sum(hist)
    accepted_total = sum(k * n for k, n in enumerate(hist))
    position_rate = [
        {"position": k, "rate": reached[k] / offered[k] if offered[k] else None, "drafted": offered[k]}
        for k in range(1, top + 1)
    ]
    conditional = []
    for k in range(1, top + 1):
        prev = steps if k == 1 else reached[k - 1]
        # those that accepted k-1 and drafted k: with a fixed num_steps every one drafted k
        conditional.append({"position": k, "rate": reached[k] / prev if prev else None})
    per_request, note = _per_request_means(rows)
    bins = _over_run(rows, drift_bins)
    return {
        "num_steps": num_steps,
        "num_steps_source": source,
        "spec": spec,
        "decode_cycles": len(cycles),
        "cycles_with_acceptance": len(rows),
        "request_steps": steps,
        "accepted_drafts": accepted_total,
        "histogram": hist,
        "position_rate": position_rate,
        "conditional_rate": conditional,
        "mean_accept_length": {
            "pooled": 1 + accepted_total / steps,
            "per_request": per_request,
            "per_request_note": note,
        },
        "by_batch_size": [
            {"batch_size": bs, "request_steps": v[0], "pooled": 1 + v[1] / v[0]}
            for bs, v in sorted(by_bs.items())
        ],
        "over_run": bins,
        "drift": bins[-1]["pooled"] - bins[0]["pooled"] if len(bins) > 1 else None,
    }


def _num_steps(spec: dict, rows: list) -> tuple[int, str]:
    """num-steps and where it came from: the server flag, else the most drafted or accepted
    seen (a lower bound); an adaptive run says the rates assume that many drafted throughout."""
    seen_max = max(max(acc) for _, acc, _ in rows)
    drafted_max = max((max(d) for _, _, d in rows if d), default=0)
    num_steps = spec.get("num_steps")
    source = "server flag --speculative-num-steps"
    if not isinstance(num_steps, int) or num_steps < 1:
        num_steps = max(seen_max, drafted_max, 1)
        source = "most drafted or accepted seen (a lower bound: no --speculative-num-steps found)"
    if spec.get("adaptive"):
        source += (
            f"; {ADAPTIVE_FLAG} changed num-steps at run time, which the records do not say per "
            "cycle: the per-position rates count every request step as drafting that many"
        )
    return num_steps, source


def _counts(
    rows: list, num_steps: int, top: int
) -> tuple[list[int], list[int], list[int], dict[int, list[int]]]:
    """Over the request steps: the histogram of accepted drafts, how many reached (accepted) and
    were offered (drafted) each position, and per batch size [request steps, accepted drafts]."""
    hist = [0] * (top + 1)
    reached = [0] * (top + 2)  # reached[k]: request steps that accepted >= k
    offered = [0] * (top + 2)  # offered[k]: request steps that drafted >= k
    by_bs: dict[int, list[int]] = {}
    for c, acc, drafted in rows:
        bs = (c.get("attrs") or {}).get("batch_size")
        bs = bs if isinstance(bs, int) else len(acc)
        slot = by_bs.setdefault(bs, [0, 0])
        for j, a in enumerate(acc):
            hist[a] += 1
            d = drafted[j] if drafted else num_steps
            for k in range(1, min(a, top) + 1):
                reached[k] += 1
            for k in range(1, min(d, top) + 1):
                offered[k] += 1
            slot[0] += 1
            slot[1] += a
    return hist, reached, offered, by_bs


def _over_run(rows: list, drift_bins: int) -> list[dict]:
    """The pooled accept length per slice of consecutive cycles (up to ``drift_bins`` slices)."""
    bins: list[dict] = []
    n = len(rows)
    nb = max(1, min(drift_bins, n))
    for b in range(nb):
        part = rows[b * n // nb : (b + 1) * n // nb]
        if not part:
            continue
        k_steps = sum(len(acc) for _, acc, _ in part)
        bins.append(
            {
                "bin": b,
                "first_cycle": part[0][0].get("cycle"),
                "last_cycle": part[-1][0].get("cycle"),
                "request_steps": k_steps,
                "pooled": 1 + sum(sum(acc) for _, acc, _ in part) / k_steps,
            }
        )
    return bins


def _per_request_means(rows) -> tuple[float | None, str]:
    """The mean of per-request mean acceptance lengths, where the records say which steps
    belong to one request: one request per cycle (drafted given, batch 1) starting at each
    ``prefill`` cycle (transformers' generate() calls)."""
    if not all(d is not None for _, _, d in rows):
        return None, "records do not name requests (SGLang batches): only the pooled mean is known"
    requests: list[list[int]] = []
    for c, acc, _ in rows:
        if (c.get("attrs") or {}).get("prefill") or not requests:
            requests.append([])
        requests[-1].append(acc[0])
    means = [1 + sum(r) / len(r) for r in requests if r]
    return _mean(means), f"{len(means)} requests (one per generate() call)"


def acceptance_lines(acc: dict | None) -> list[str]:
    """The table's acceptance section (empty when the records carry no acceptance)."""
    if not acc:
        return []
    means = acc["mean_accept_length"]
    lines = [
        "acceptance (draft tokens accepted per request per verify step; "
        f"num_steps {acc['num_steps']}, {acc['cycles_with_acceptance']} cycles carry it, "
        f"{acc['request_steps']} request steps):",
    ]
    total = acc["request_steps"] or 1
    hist = "  ".join(f"{k}:{n / total * 100:.1f}%" for k, n in enumerate(acc["histogram"]))
    lines.append(f"  accepted drafts   {hist}")
    rates = "  ".join(
        f"{r['position']}:{r['rate'] * 100:.1f}%" if r["rate"] is not None else f"{r['position']}:-"
        for r in acc["position_rate"]
    )
    lines.append(f"  accepted at k     {rates}   (among requests that drafted k)")
    pooled = f"{means['pooled']:.3f}"
    per_req = f"{means['per_request']:.3f}" if means["per_request"] is not None else "-"
    lines.append(
        f"  accept length     pooled over verify steps {pooled}; mean of per-request means {per_req}"
        + ("" if means["per_request"] is not None else f" ({means['per_request_note']})")
    )
    if len(acc["by_batch_size"]) > 1:
        by = ", ".join(f"bs {r['batch_size']}: {r['pooled']:.2f}" for r in acc["by_batch_size"][-6:])
        lines.append(f"  by batch size     {by}")
    if acc["drift"] is not None:
        seq = " -> ".join(f"{b['pooled']:.2f}" for b in acc["over_run"])
        lines.append(f"  over the run      {seq} (drift {acc['drift']:+.2f} tokens)")
    return lines


def prediction_lines(pred: dict | None) -> list[str]:
    """The table's what-if line (summary.json ``prediction``)."""
    if not pred or len(pred["ratio_by_num_steps"]) < 2:
        return []
    ratios = " ".join(f"{n}:{r:.2f}" for n, r in pred["ratio_by_num_steps"].items())
    best = pred["best_num_steps"]
    return [
        f"what-if: num-steps {best} predicted best, {pred['ratio_by_num_steps'][str(best)]:.2f}x this run's "
        f"{'benchmark' if pred.get('ratio_of') == 'benchmark' else 'decode'} tokens/s (num-steps {ratios}); "
        "intervals and assumptions: invoke profile.predict RUN"
    ]
