"""One vocabulary for the cycle counts: table.txt's "cycles:" line, summary.json's
``cycle_counts`` and profile.predict's header name each count by what it counts.

A report's parts describe different sets of cycles, for good reasons: the phase statistics
leave stalls out, acceptance is read wherever a cycle carries it, the time in cycles and the
what-if need a cycle's period (its start to the next cycle's start) and leave the client's
pauses out. Saying "38 cycles" in one place and "30" in another without the name of the set
reads as a contradiction; every count below carries its name, and the sets are of the lead
rank's process (the one whose tokens the report counts; a tensor-parallel peer has the same
cycles), inside the measured window unless the name says otherwise.
"""

from __future__ import annotations

from patchkit.report.acceptance import request_accepts
from patchkit.report.benchsim import client_pauses, periods_of
from patchkit.report.kinds import cycle_kind

# summary.json cycle_counts: key -> what it counts (docs/runtime.md lists the same)
COUNT_WORDS = {
    "recorded": "cycles recorded inside the measured window (timed or not)",
    "warmup_excluded": "cycles before the measured window (warm-up), excluded from everything",
    "after_window_excluded": "cycles after the measured window, excluded from everything",
    "decode": "recorded decode cycles",
    "prefill": "recorded prefill cycles (kind prefill, or the first cycle of a generate() call)",
    "timed": "recorded cycles whose phases were timed (sampling or a budget times fewer)",
    "stalls": "timed cycles over the stall rule (kernel compilation, a loaded machine): not in the statistics",
    "in_statistics": "timed cycles that are not stalls: the phase statistics and shares",
    "with_acceptance": "recorded cycles that carry per-request acceptance (the acceptance section)",
    "decode_with_period": "decode cycles with a period (the next cycle of the same call started; not a stall, not a client pause): time in cycles",
    "prefill_with_period": "prefill cycles with a period: time in cycles",
    "client_pauses": "cycles whose period holds the client's pause (over 20x the median period), left out of the periods",
    "modelled": "decode cycles with a period that carry acceptance: what profile.predict models",
}


def is_prefill(cycle: dict) -> bool:
    attrs = cycle.get("attrs") or {}
    return cycle_kind(cycle) == "prefill" or bool(attrs.get("prefill"))


def lead_process(selection):
    """The lead rank's process of a report's Selection (the first of the lowest rank)."""
    if not selection.procs:
        return None, set(), None
    lead = min(selection.procs, key=lambda p: p.rank)
    at = selection.procs.index(lead)
    return lead, selection.stall_sets[at], selection.window_counts[at]


def cycle_counts(selection) -> dict | None:
    """summary.json's ``cycle_counts`` (COUNT_WORDS) of a report's Selection."""
    lead, stalls, window = lead_process(selection)
    if lead is None:
        return None
    cycles = [c for c in lead.cycles if c.get("ab") != "off"]
    timed = {c["cycle"] for c in lead.timed_cycles if c.get("ab") != "off"}
    pauses = client_pauses(cycles)
    with_period = {
        c["cycle"]
        for c, period in periods_of(cycles)
        if period > 0 and c["cycle"] not in stalls and c["cycle"] not in pauses
    }
    prefill = {c["cycle"] for c in cycles if is_prefill(c)}
    accepted = {
        c["cycle"] for c in cycles if (got := request_accepts(c.get("attrs") or {})) is not None and got[0]
    }
    decode = {c["cycle"] for c in cycles} - prefill
    return {
        "scope": f"the lead rank's process (rank {lead.rank}, pid {lead.header.get('pid')})",
        "recorded": len(cycles),
        "warmup_excluded": getattr(window, "before", 0),
        "after_window_excluded": getattr(window, "after", 0),
        "decode": len(decode),
        "prefill": len(prefill),
        "timed": len(timed),
        "stalls": len(stalls & timed),
        "in_statistics": len(timed - stalls),
        "with_acceptance": len(accepted),
        "decode_with_period": len(with_period & decode),
        "prefill_with_period": len(with_period & prefill),
        "client_pauses": len(pauses),
        "modelled": len(with_period & decode & accepted),
    }


def counts_line(counts: dict | None) -> str | None:
    """The table's one line of cycle counts, each named."""
    if not counts:
        return None
    c = counts
    return (
        f"cycles (lead rank): {c['recorded']} recorded in the measured window ({c['decode']} decode, "
        f"{c['prefill']} prefill; {c['warmup_excluded']} warm-up before it and {c['after_window_excluded']} "
        f"after it excluded); {c['timed']} timed, {c['stalls']} stall{'s' if c['stalls'] != 1 else ''}, "
        f"{c['in_statistics']} in the statistics; {c['with_acceptance']} carry acceptance; "
        f"{c['decode_with_period']} decode + {c['prefill_with_period']} prefill with a period "
        f"(time in cycles; {c['client_pauses']} client pause{'s' if c['client_pauses'] != 1 else ''} "
        f"left out); {c['modelled']} decode cycles modelled by the what-if"
    )
