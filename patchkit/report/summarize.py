"""Turn loaded timing into a Summary: per-phase statistics, shares of the cycle, throughput.

Shares use device time when every cycle has it (events and sync modes) and host time
otherwise; `Summary.basis` says which. A phase's share is the sum of its time over all
cycles divided by the sum of the cycles' time, so the shares of non-overlapping top-level
phases add up to the part of the cycle they cover (the rest is untimed glue).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from patchkit.report.load import ProcessTiming

REPORT_SCHEMA = "patchkit.report/1"
META_THROUGHPUT = "tokens_per_s"
META_BASELINE = "baseline_tokens_per_s"
META_ACCEPT = "accept_length"


def percentile(values: list[float], q: float) -> float | None:
    """Linear-interpolated percentile (q in 0..100), as numpy's default."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def distribution(values_ns: list[int]) -> dict | None:
    """mean/p50/p99/total/min/max in milliseconds, or None when there are no values."""
    vals = [v / 1e6 for v in values_ns if v is not None]
    if not vals:
        return None
    return {"mean": sum(vals) / len(vals), "p50": percentile(vals, 50),
            "p99": percentile(vals, 99), "min": min(vals), "max": max(vals),
            "total": sum(vals), "n": len(vals)}


@dataclass
class Summary:
    """What the report says, as plain data; `to_dict()` is summary.json (stable keys)."""

    timing_dir: str
    mode: str
    basis: str
    ranks: list[dict]
    cycle: dict
    phases: list[dict]
    top_level_share: float | None
    decode: dict
    meta: dict
    throughput: dict
    files: dict = field(default_factory=dict)
    schema: str = REPORT_SCHEMA
    # a run without speculation beside this one (profile.remote --baseline): tokens_per_s,
    # spec_tokens_per_s, ratio (spec / baseline), accept_length, server_command, error
    baseline: dict | None = None
    # decode cycles only (cycle attr kind "decode", or no kind): count, basis, top_level_share,
    # phase_shares {top-level phase: % of the decode cycles' time}
    decode_cycle: dict | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    def phase(self, name: str, parent: str | None = None) -> dict | None:
        """The first phase entry called `name` (optionally under `parent`)."""
        for entry in self.phases:
            if entry["name"] == name and (parent is None or entry["parent"] == parent):
                return entry
        return None


def _phase_key(rec: dict) -> tuple:
    return (rec.get("depth") or 0, rec.get("parent"), rec["name"])


def _ordered_keys(procs: list[ProcessTiming]) -> list[tuple]:
    """Phase keys as a tree in timeline order: each parent followed by its children."""
    first_seen: dict[tuple, tuple] = {}
    for proc in procs:
        cycle_t0 = {c["cycle"]: c["t0"] for c in proc.cycles}
        for rec in proc.phases:
            key = _phase_key(rec)
            cyc = rec.get("cycle")
            base = cycle_t0.get(cyc, 0)
            if rec.get("t0") is not None:
                offset = rec["t0"] - base if cyc in cycle_t0 else 0
            else:
                offset = rec.get("dev_off_ns") or 0
            rank = (cyc is None, offset)
            if key not in first_seen or rank < first_seen[key]:
                first_seen[key] = rank
    children: dict[tuple, list[tuple]] = {}
    for key in first_seen:
        depth, parent, _ = key
        children.setdefault((depth - 1, parent), []).append(key)
    for kids in children.values():
        kids.sort(key=lambda k: first_seen[k])
    ordered: list[tuple] = []

    def walk(node_depth, node_name):
        for kid in children.get((node_depth, node_name), []):
            if kid not in ordered:
                ordered.append(kid)
                walk(kid[0], kid[2])

    walk(-1, None)
    ordered += [k for k in sorted(first_seen, key=lambda k: first_seen[k]) if k not in ordered]
    return ordered


def _cycle_time(c: dict, basis: str):
    return c.get("dev_ns") if basis == "device" else c.get("host_ns")


def _decode_cycle(procs: list[ProcessTiming], basis: str) -> dict:
    """What the top-level phases cover of the decode cycles alone (prefill cycles, kind
    "prefill", have phases of their own and would dilute the shares)."""
    field_name = "dev_ns" if basis == "device" else "host_ns"
    count = total = 0
    sums: dict[str, int] = {}
    for proc in procs:
        ids = {c["cycle"] for c in proc.cycles
               if (c.get("attrs") or {}).get("kind", "decode") == "decode"}
        count += len(ids)
        total += sum(_cycle_time(c, basis) or 0 for c in proc.cycles if c["cycle"] in ids)
        for rec in proc.phases:
            if not rec.get("depth") and rec.get("cycle") in ids:
                sums[rec["name"]] = sums.get(rec["name"], 0) + (rec.get(field_name) or 0)
    shares = {name: 100.0 * value / total for name, value in sums.items()} if total else {}
    return {"count": count, "basis": basis, "phase_shares": shares,
            "top_level_share": sum(shares.values()) if shares else None}


def _decode_stats(cycles: list[dict]) -> dict:
    """Batch size and accepted length from cycle attrs (see the runtime's docstring)."""
    reqs = tokens = drafts = 0
    batch_sizes = []
    for c in cycles:
        attrs = c.get("attrs") or {}
        bs = attrs.get("batch_size")
        if isinstance(bs, (int, float)):
            batch_sizes.append(bs)
        acc = attrs.get("accepted")
        tok = attrs.get("tokens")
        if isinstance(tok, list) and not isinstance(acc, list):
            # per-request tokens (e.g. sglang 0.5.23's accept_lens): one request per entry,
            # accepted drafts = tokens - 1 each
            n = len(tok)
            tok = sum(v for v in tok if isinstance(v, (int, float)))
            if n:
                reqs += n
                tokens += tok
                drafts += tok - n
            continue
        if isinstance(acc, list):
            n_req = len(acc)
            acc = sum(acc)
        else:
            n_req = bs if isinstance(bs, (int, float)) else None
        if n_req and isinstance(acc, (int, float)):
            reqs += n_req
            drafts += acc
            tokens += tok if isinstance(tok, (int, float)) else acc + n_req
        elif n_req and isinstance(tok, (int, float)):
            reqs += n_req
            tokens += tok
    return {
        "cycles_with_batch_size": len(batch_sizes),
        "batch_size_mean": sum(batch_sizes) / len(batch_sizes) if batch_sizes else None,
        "request_cycles": reqs,
        "tokens": tokens,
        "accept_length_mean": tokens / reqs if reqs else None,
        "accepted_drafts_mean": drafts / reqs if reqs and drafts else None,
    }


def _phase_entries(procs, cycles_by_proc, basis, total_cycle_ns, total_cycle_host_ns):
    keys = _ordered_keys(procs)
    buckets = {k: [] for k in keys}
    for proc in procs:
        for rec in proc.phases:
            buckets[_phase_key(rec)].append(rec)
    n_cycles = sum(len(c) for c in cycles_by_proc)
    entries = []
    for key in keys:
        recs = buckets[key]
        depth, parent, name = key
        in_cycle = [r for r in recs if r.get("cycle") is not None]
        basis_field = "dev_ns" if basis == "device" else "host_ns"
        basis_sum = sum(r.get(basis_field) or 0 for r in in_cycle)
        host_sum = sum(r.get("host_ns") or 0 for r in in_cycle)
        entries.append({
            "name": name, "parent": parent, "depth": depth, "count": len(recs),
            "per_cycle": len(in_cycle) / n_cycles if n_cycles else None,
            "graph": any(r.get("graph") for r in recs),
            "captured": any(r.get("captured") for r in recs),
            "outside_cycles": len(recs) - len(in_cycle),
            "host_ms": distribution([r.get("host_ns") for r in recs]),
            "dev_ms": distribution([r.get("dev_ns") for r in recs]),
            "share_of_cycle": 100.0 * basis_sum / total_cycle_ns if total_cycle_ns else None,
            "host_share_of_cycle": (100.0 * host_sum / total_cycle_host_ns
                                    if total_cycle_host_ns else None),
        })
    return entries


def _throughput(meta: dict, decode: dict, cycles: list[dict]) -> dict:
    spec = meta.get(META_THROUGHPUT)
    base = meta.get(META_BASELINE)
    wall_ns = sum(c.get("host_ns") or 0 for c in cycles)
    timed = decode["tokens"] / (wall_ns / 1e9) if decode["tokens"] and wall_ns else None
    return {
        "tokens_per_s": spec,
        "baseline_tokens_per_s": base,
        "speedup": spec / base if spec and base else None,
        "tokens_per_s_in_cycles": timed,
    }


def summarize(procs: list[ProcessTiming], timing_dir: str, meta: dict | None = None) -> Summary:
    meta = dict(meta or {})
    modes = sorted({p.mode for p in procs})
    mode = modes[0] if len(modes) == 1 else "mixed"
    all_cycles = [c for p in procs for c in p.cycles]
    has_dev = bool(all_cycles) and all(c.get("dev_ns") is not None for c in all_cycles)
    basis = "device" if has_dev else "host"
    total_cycle_ns = sum(_cycle_time(c, basis) or 0 for c in all_cycles)
    total_host_ns = sum(c.get("host_ns") or 0 for c in all_cycles)
    phases = _phase_entries(procs, [p.cycles for p in procs], basis, total_cycle_ns, total_host_ns)
    top = [e["share_of_cycle"] for e in phases
           if e["depth"] == 0 and e["share_of_cycle"] is not None]
    # tensor-parallel ranks all see the same batch: count tokens on the lowest rank only
    first_rank = min(p.rank for p in procs)
    lead_cycles = [c for p in procs if p.rank == first_rank for c in p.cycles]
    decode = _decode_stats(lead_cycles)
    if meta.get(META_ACCEPT) is not None:
        decode["accept_length_reported"] = meta[META_ACCEPT]
    ranks = []
    for p in procs:
        ranks.append({
            "rank": p.rank, "pid": p.header.get("pid"), "host": p.header.get("host"),
            "mode": p.mode, "requested_mode": p.header.get("requested_mode"),
            "file": p.path.name, "cycles": len(p.cycles), "phases": len(p.phases),
            "cycle_host_ms": distribution([c.get("host_ns") for c in p.cycles]),
            "cycle_dev_ms": distribution([c.get("dev_ns") for c in p.cycles]),
            "stats": p.stats, "truncated_lines": p.truncated_lines,
            "cuda_device": p.header.get("cuda_device"), "torch": p.header.get("torch"),
        })
    cycle = {
        "count": len(all_cycles),
        "host_ms": distribution([c.get("host_ns") for c in all_cycles]),
        "dev_ms": distribution([c.get("dev_ns") for c in all_cycles]),
    }
    return Summary(timing_dir=str(timing_dir), mode=mode, basis=basis, ranks=ranks, cycle=cycle,
                   phases=phases, top_level_share=sum(top) if top else None, decode=decode,
                   meta=meta, throughput=_throughput(meta, decode, lead_cycles),
                   decode_cycle=_decode_cycle(procs, basis))
