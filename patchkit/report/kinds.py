"""Kinds of cycle (the `kind=` given to cycle_begin) and the order a reader wants them in."""

from __future__ import annotations

KIND_PRIMARY = "decode"
KIND_ORDER = ("decode", "prefill")
NO_KIND = "unspecified"  # cycles begun without kind=


def cycle_kind(cycle: dict) -> str:
    kind = (cycle.get("attrs") or {}).get("kind")
    return NO_KIND if kind is None else str(kind)


def ordered_kinds(kinds) -> list[str]:
    """decode first, then prefill, then any other kind by name."""
    kinds = set(kinds)
    return [k for k in KIND_ORDER if k in kinds] + sorted(kinds - set(KIND_ORDER))


def decode_kind_of(summary: dict) -> str | None:
    """The kind a summary.json's decode figures describe: decode, else cycles without a kind."""
    kinds = summary.get("cycle_kinds") or {}
    return KIND_PRIMARY if KIND_PRIMARY in kinds else NO_KIND if NO_KIND in kinds else None
