"""Phase timer: per-cycle, per-phase host and GPU timing for instrumented code.

This file is the source of truth for the module that patchkit's patch series add to a target
package (for example sglang/srt/speculative/phase_timer.py). It is copied there verbatim, so it
is self-contained: the standard library only at import time, torch used only when the host
program has already imported it (or when a CUDA mode is asked for explicitly).

Instrumented code imports the module once and calls single-line statements::

    from sglang.srt.speculative import phase_timer as _pt
    _pt.cycle_begin(kind="decode", batch_size=bs)
    _pt.begin("draft")
    _pt.end("draft")
    _pt.note(accepted=n)
    _pt.cycle_end()

Always call through the module (``_pt.begin``): the functions are rebound (by _bind alone,
from the table _api_table) when the mode is chosen and while a cycle runs, and to a no-op when
timing is off or has failed. Nothing here raises into the host program. It is set up through
PATCHKIT_TIMER* environment variables (PATCHKIT_TIMER=off turns it off).

The settings, the record schema, what survives a kill and how this file is built are described
in patchkit's docs/runtime.md (the project that ships this file).
"""

import atexit
import json
import os
import socket
import sys
import threading
import time

SCHEMA = "patchkit.timing/1"
MODES = ("events", "sync", "host", "off")
FILE_PREFIX = "phase-timing"
EVENT_APIS = ("torch.Event", "torch.cuda.Event")

TYPE_CHECKING = False
if TYPE_CHECKING:  # (for mypy: nothing more is imported at run time)
    from typing import Any

_perf = time.perf_counter_ns
_NEVER = -(1 << 62)
_MAX_PENDING = 1 << 12  # beyond this many unresolved cycles, wait for the oldest
# events mode, every cycle timed: device times read this many timed cycles at a time unless
# PATCHKIT_TIMER_RESOLVE_BATCH says otherwise (the H200's verify-bound v1 server: +2.37 %
# reading at each cycle, +0.92 % 16 at a time; patchkit's bench/RESULTS.md, "What the timer
# costs on the H200")
_FULL_RESOLVE_BATCH = 16
# PATCHKIT_TIMER_BUDGET: the timed probability follows the timer's own cost (see _control)
_BUDGET_DEFAULT = 1.0  # percent of the cycle period
_BUDGET_WINDOW = 64  # decisions at cycle indices that are multiples of this (as on every rank)
_BUDGET_MIN_TIMED = 4  # timed cycles measured before a decision (else the window runs on)
_BUDGET_MAX_LEVEL = 6  # p = 2**-k, k = 0..6: at least about one cycle in 64 timed
_BUDGET_RAISE = 1.25  # a higher rate only where the budget allows 25 % more than it costs
_BUDGET_IDLE = 2.0  # a window's period counts at most twice the last one (engine idle)
_BUDGET_CALIBRATE_FROM = 8  # the first cycles are cold outliers: calibrate from this index
_BUDGET_RECORD_EVERY = 16  # a "sampling" record at a change, else every 16th decision
# the cost the period shows: adjacent cycles of one kind, one timed and one not (see _pair)
_BUDGET_MIN_PAIRS = 32  # pairs before their estimate counts (else the host cost alone)
_BUDGET_MAX_PAIRS = 256  # the newest pairs kept
_BUDGET_PAIR_Z = 1.645  # one-sided 95 % upper bound on the pairs' median difference
_BUDGET_REGIME = 1.25  # pairs stand while the periods of now stay within this factor of theirs
_BUDGET_NOW = 64  # "now": the newest periods of adjacent cycles of one kind
_NEVER_CYCLE = 1 << 62
_TRUE = ("1", "true", "yes", "on")
# with os.register_at_fork (bottom of this file) a forked child rebinds the module functions
# itself; only without it does cycle_begin compare pids
_NO_FORK_HOOK = not hasattr(os, "register_at_fork")


def _noop(*args, **kwargs):
    return None


def _env_int(name, default, minimum=1):
    try:
        return max(minimum, int(os.environ.get(name, default)))
    except ValueError:
        return default


def _warn(message):
    try:
        sys.stderr.write("patchkit phase_timer: %s\n" % message)
        sys.stderr.flush()
    except Exception:
        pass


def _requested_mode():
    raw = os.environ.get("PATCHKIT_TIMER", "").strip().lower()
    if raw in ("", "auto", "default"):
        return None
    if raw in ("0", "false", "no", "none", "disabled"):
        return "off"
    if raw not in MODES:
        _warn("PATCHKIT_TIMER=%r is not one of %s; using the default" % (raw, "|".join(MODES)))
        return None
    return raw


def _torch_if_loaded(import_it=False):
    torch = sys.modules.get("torch")
    if torch is None and import_it:
        try:
            torch = __import__("torch")  # only when a CUDA mode was asked for explicitly
        except Exception:
            return None
    return torch


def _cuda_ready(torch):
    try:
        return bool(torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized())
    except Exception:
        return False


def _dist_rank():
    """(rank, world size) from torch.distributed when it is initialised, else None."""
    dist = getattr(sys.modules.get("torch"), "distributed", None)
    if dist is None:
        return None
    try:
        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except Exception:
        pass
    return None


def _detect_rank():
    """(rank, world size, source); source says how final it is."""
    forced = os.environ.get("PATCHKIT_TIMER_RANK")
    if forced is not None and forced.strip().isdigit():
        return int(forced), None, "env:PATCHKIT_TIMER_RANK"
    found = _dist_rank()
    if found is not None:
        return found[0], found[1], "torch.distributed"
    raw_world = os.environ.get("WORLD_SIZE", "")
    world = int(raw_world) if raw_world.isdigit() else None
    for var in ("RANK", "LOCAL_RANK", "TP_RANK", "SGLANG_TP_RANK"):
        value = os.environ.get(var, "").strip()
        if value.isdigit():
            return int(value), world, "env:" + var
    return 0, world, "default"


def _boot_id():
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as fh:
            return fh.read().strip() or None
    except Exception:
        return None


def _event_supports_external(torch):
    import inspect

    try:
        return "external" in inspect.signature(torch.cuda.Event.__new__).parameters
    except (TypeError, ValueError, AttributeError):
        return False


_SCALARS = frozenset((int, float, str, bool, type(None)))


def _plain_attrs(attrs):
    """_plain over a dict of attributes (the common scalars without a call)."""
    scalars = _SCALARS
    return {k: v if type(v) in scalars else _plain(v) for k, v in attrs.items()}


def _plain(value):
    """A JSON-ready copy of an attribute value (tensors become numbers or lists)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    tolist = getattr(value, "tolist", None)
    if tolist is not None:
        out = tolist()
        if isinstance(out, list) and len(out) == 1:
            out = out[0]
        return out
    return str(value)


# phase record fields (a list while buffered; written as a JSON object)
_NAME, _CYCLE, _DEPTH, _PARENT, _T0, _T1, _DEV, _OFF, _GRAPH, _CAPTURED, _ATTRS = range(11)
_PHASE_FORMAT = (
    '{"kind":"phase","name":%s,"cycle":%s,"depth":%d,"parent":%s,"t0":%s,"t1":%s,'
    '"host_ns":%s,"dev_ns":%s,"dev_off_ns":%s,"graph":%s,"captured":%s%s}\n'
)
_CYCLE_FORMAT = (
    '{"kind":"cycle","cycle":%d,"t0":%d,"t1":%d,"host_ns":%d,"dev_ns":%s,"dev_gap_ns":%s%s,"attrs":%s}\n'
)
_JSON_ENCODER = json.JSONEncoder(separators=(",", ":"), default=str)


def _json_line(rec):
    return _JSON_ENCODER.encode(rec) + "\n"


def _quoted(names, name):
    text = names.get(name)
    if text is None:
        text = names[name] = _JSON_ENCODER.encode(name)
    return text


def _opt(value):
    return "null" if value is None else "%d" % value


def _phase_line(rec, names):
    """One phase record as a JSON line; about 3x faster than json on the equivalent dict."""
    t0, t1, dev, off = rec[_T0], rec[_T1], rec[_DEV], rec[_OFF]
    name, parent = names.get(rec[_NAME]), names.get(rec[_PARENT])
    return _PHASE_FORMAT % (
        name or _quoted(names, rec[_NAME]),
        "null" if rec[_CYCLE] is None else rec[_CYCLE],
        rec[_DEPTH],
        parent or _quoted(names, rec[_PARENT]),
        "null" if t0 is None else t0,
        "null" if t1 is None else t1,
        "null" if t0 is None else t1 - t0,
        "null" if dev is None else dev,
        "null" if off is None else off,
        "true" if rec[_GRAPH] else "false",
        "true" if rec[_CAPTURED] else "false",
        "" if rec[_ATTRS] is None else ',"attrs":' + _JSON_ENCODER.encode(rec[_ATTRS]),
    )


_IN_CYCLE_FORMAT = (
    '{"kind":"phase","name":%s,"cycle":%d,"depth":%d,"parent":%s,"t0":%d,'
    '"t1":%d,"host_ns":%d,"dev_ns":%s,"dev_off_ns":%s,"graph":%s,'
    '"captured":false%s}\n'
)


def _cycle_phase_line(rec, names):
    """_phase_line for a record timed on the host inside a cycle (the common case)."""
    name, cycle, depth, parent, t0, t1, dev, off, graph, _, attrs = rec
    return _IN_CYCLE_FORMAT % (
        names.get(name) or _quoted(names, name),
        cycle,
        depth,
        names.get(parent) or _quoted(names, parent),
        t0,
        t1,
        t1 - t0,
        "null" if dev is None else dev,
        "null" if off is None else off,
        "true" if graph else "false",
        "" if attrs is None else ',"attrs":' + _JSON_ENCODER.encode(attrs),
    )


_SHAPE_FORMAT = (
    '{"kind":"phase","name":%s,"cycle":%%d,"depth":%d,"parent":%s,"t0":%%d,'
    '"t1":%%d,"host_ns":%%d,"dev_ns":null,"dev_off_ns":null,"graph":%s,'
    '"captured":false%%s}\n'
)


def _host_phase_lines(recs, names, shapes):
    """The phase lines of one cycle timed on the host (no device times yet), formatted with
    one % over a template per shape of the cycle (names, depths, parents, graph flags),
    which repeats cycle after cycle: about 2.5x faster than a format per line."""
    shape = tuple([(r[_NAME], r[_DEPTH], r[_PARENT], r[_GRAPH]) for r in recs])
    fmt = shapes.get(shape)
    if fmt is None:
        if len(shapes) > 256:
            shapes.clear()
        fmt = shapes[shape] = "".join(
            [
                _SHAPE_FORMAT
                % (  # a "%" in a name stays literal
                    (names.get(name) or _quoted(names, name)).replace("%", "%%"),
                    depth,
                    (names.get(parent) or _quoted(names, parent)).replace("%", "%%"),
                    "true" if graph else "false",
                )
                for name, depth, parent, graph in shape
            ]
        )
    values: list = []
    encode = _JSON_ENCODER.encode
    for rec in recs:
        t0, t1, attrs = rec[_T0], rec[_T1], rec[_ATTRS]
        values += (rec[_CYCLE], t0, t1, t1 - t0, "" if attrs is None else ',"attrs":' + encode(attrs))
    return fmt % tuple(values)


def _cycle_line(index, t0, t1, dev, gap, ab, attrs):
    return _CYCLE_FORMAT % (
        index,
        t0,
        t1,
        t1 - t0,
        _opt(dev),
        _opt(gap),
        "" if ab is None else ',"ab":"%s"' % ab,
        _attrs_json(attrs) if attrs else "{}",
    )


_ATTR_TEXT: "dict[object, str]" = {}  # attr name or string value -> its JSON text (bounded: see _attrs_json)


def _attrs_json(attrs):
    """A cycle's attrs as JSON: the usual flat dict of names to ints, strings, bools and
    None formatted directly (about 5x faster than the json module); anything else by json."""
    known = _ATTR_TEXT
    parts = []
    for key, value in attrs.items():
        kind = type(value)
        name = known.get(key)
        if name is None:
            if type(key) is not str:
                return _JSON_ENCODER.encode(_plain_attrs(attrs))
            name = _JSON_ENCODER.encode(key)
            if len(known) < 4096:
                known[key] = name
        if kind is int:
            parts.append("%s:%d" % (name, value))
        elif kind is str:
            text = known.get(value)
            if text is None:
                text = _JSON_ENCODER.encode(value)
                if len(known) < 4096:
                    known[value] = text
            parts.append(name + ":" + text)
        elif value is None or kind is bool:
            parts.append(name + (":null" if value is None else ":true" if value else ":false"))
        else:
            return _JSON_ENCODER.encode(_plain_attrs(attrs))
    return "{" + ",".join(parts) + "}"


def _untimed_attrs(attrs):
    """The attrs of an untimed cycle, to be formatted later: values that are CUDA tensors are
    left out (reading them would wait for the GPU, and an untimed cycle records no event),
    other non-scalars made plain now (the caller may change them after cycle_end)."""
    scalars = _SCALARS
    for v in attrs.values():
        if type(v) not in scalars:
            break
    else:
        return attrs
    return {
        k: v if type(v) in scalars else _plain(v)
        for k, v in attrs.items()
        if type(v) in scalars or not _is_cuda_tensor(v)
    }


_DEV_PHASES: "dict[int, str]" = {}  # number of phases in a cycle -> the template of its dev record's list


def _ms_to_ns(ms):
    return round(ms * 1e6)


def _is_cuda_tensor(value):
    return getattr(value, "is_cuda", False) is True and hasattr(value, "to")


class _Budget:
    """PATCHKIT_TIMER_BUDGET's controller: the timed probability p = 2**-level that the
    timer's cost allows, decided once a window (see _Timer._control). The cost of a timed
    cycle is the lower of two measurements: the runtime's host time (cycle_begin/cycle_end
    of every timed cycle, the resolve batch and the write included, plus the window's phase
    records times the calibrated begin/end/note time per phase), and what a timed cycle adds
    to the period (pair, visible_cost). p* = pct * period / cost; the rate in effect is
    lowered at once to the highest level <= p*, raised only to a level <= p* / _BUDGET_RAISE
    (no flapping at a level's edge)."""

    def __init__(self, pct):
        self.pct = pct
        self.level = 0
        self.p = 1.0 if pct > 0 else 0.0
        self.per_phase = None  # ns of begin/end/note per phase record (calibrated)
        self.cost_est = self.period_est = None  # ns per timed cycle; ns start to start
        self.ctl_t0 = None  # the window: host start and index of its first cycle
        self.ctl_cycle = 0
        self.decisions = self.changes = 0
        # the cost the period shows (pair): the newest differences in ns between adjacent
        # cycles' start-to-start periods, a timed one minus an untimed one; the untimed
        # period of each (they stand while the periods of now stay near theirs); the newest
        # periods of adjacent cycles of one kind, timed or not
        self.pairs = []
        self.pair_periods = []
        self.periods = []
        self.last_start = None  # (index, t0, timed, kind) of the last cycle begun
        self.last_period = None  # (index, ns start to start, timed) of the one before it
        self.visible = None  # ns per timed cycle: the pairs' upper bound at the last decision

    @staticmethod
    def describe():
        """The header's sampling.controller."""
        return {
            "method": "visible-cost",
            "window": _BUDGET_WINDOW,
            "min_pairs": _BUDGET_MIN_PAIRS,
            "pair_z": _BUDGET_PAIR_Z,
            "regime": _BUDGET_REGIME,
            "min_timed": _BUDGET_MIN_TIMED,
            "levels": "2^-k",
            "p_min": 1.0 / (1 << _BUDGET_MAX_LEVEL),
            "raise_margin": _BUDGET_RAISE,
            "idle_cap": _BUDGET_IDLE,
        }

    def calibrated(self, per_phase):
        """A calibration cycle's host time per phase record (a running mean)."""
        old = self.per_phase
        self.per_phase = per_phase if old is None else (old + per_phase) / 2.0

    def pair(self, n, t0, timed, kind):
        """At the start of cycle n: the period of cycle n-1 (start to start, both of one
        kind) is known; where n-2 and n-1 differ in being timed, the difference of their
        periods (timed minus untimed) is one pair. A long cycle beside a short one of the
        same workload cancels out, slow drift too; the median of the pairs is what a timed
        cycle adds to the period, host time the device hid left out."""
        last = self.last_start
        self.last_start = (n, t0, timed, kind)
        if last is None or last[0] != n - 1 or last[3] != kind:
            self.last_period = None
            return
        period = t0 - last[1]
        if self.period_est is not None and period > _BUDGET_IDLE * self.period_est:
            self.last_period = None  # an idle engine, not a period
            return
        periods = self.periods
        periods.append(period)
        if len(periods) > _BUDGET_NOW:
            del periods[0]
        before = self.last_period
        self.last_period = (n - 1, period, last[2])
        if before is not None and before[0] == n - 2 and before[2] != last[2]:
            pairs = self.pairs
            if last[2]:
                pairs.append(period - before[1])
                self.pair_periods.append(before[1])
            else:
                pairs.append(before[1] - period)
                self.pair_periods.append(period)
            if len(pairs) > _BUDGET_MAX_PAIRS:
                del pairs[0], self.pair_periods[0]

    def visible_cost(self):
        """The host time per timed cycle that the period shows: a one-sided 95 % upper
        bound on the pairs' median (its standard error from their median absolute
        deviation), at least 0; None with fewer than _BUDGET_MIN_PAIRS pairs. First, where
        the median of the newest _BUDGET_NOW adjacent periods is more than _BUDGET_REGIME
        times away from the median untimed period of the pairs, the pairs are dropped
        (another workload: a cost hidden there need not be hidden here)."""
        pairs = self.pairs
        if pairs and len(self.periods) >= _BUDGET_NOW // 4:
            now, ref = _median(self.periods), _median(self.pair_periods)
            if not ref / _BUDGET_REGIME <= now <= ref * _BUDGET_REGIME:
                del pairs[:], self.pair_periods[:]
        n = len(pairs)
        if n < _BUDGET_MIN_PAIRS:
            return None
        median = _median(pairs)
        mad = _median([abs(x - median) for x in pairs])
        se = 1.2533 * 1.4826 * mad / n**0.5
        return max(0.0, median + _BUDGET_PAIR_Z * se)

    def ready(self, timed, phases):
        """Enough measured for a decision: _BUDGET_MIN_TIMED timed cycles (and a calibrated
        phase cost where phases ran); else the window runs on to the next boundary."""
        return timed >= _BUDGET_MIN_TIMED and not (phases and self.per_phase is None)

    def decide(self, now, index, spent, timed, phases):
        """The decision at cycle index (host time now) over the window since the last one:
        spent, the host ns in its timed cycles' cycle_begin/cycle_end; timed, how many;
        phases, their phase records. Sets p; returns the "sampling" record to write (at a
        change, the first decision and every _BUDGET_RECORD_EVERY-th), else None. The
        period is the window's mean host start-to-start, at most _BUDGET_IDLE times the
        last one (an idle engine is not a long cycle)."""
        period = (now - self.ctl_t0) / float(index - self.ctl_cycle)
        if self.period_est is not None:
            period = min(period, _BUDGET_IDLE * self.period_est)
        host = (spent + phases * (self.per_phase or 0.0)) / timed
        self.cost_est = host if self.cost_est is None else (self.cost_est + host) / 2.0
        self.period_est = period
        self.visible = self.visible_cost()
        cost = self.cost_est if self.visible is None else min(self.cost_est, self.visible)
        want = self.pct / 100.0 * period / cost if cost > 0 else float("inf")
        old = self.level
        new = _level(want)
        if new <= old:  # the budget allows as much or more: raise only with room to spare
            new = min(old, _level(want / _BUDGET_RAISE))
        self.level = new
        self.p = 1.0 / (1 << new)
        self.decisions += 1
        if new != old:
            self.changes += 1
        rec = None
        if new != old or self.decisions == 1 or self.decisions % _BUDGET_RECORD_EVERY == 0:
            rec = {
                "kind": "sampling",
                "cycle": index,
                "p": self.p,
                "prev_p": 1.0 / (1 << old),
                "cost_ns": int(cost),
                "host_cost_ns": int(self.cost_est),
                "visible_ns": None if self.visible is None else int(self.visible),
                "pairs": len(self.pairs),
                "period_ns": int(period),
                "per_phase_ns": None if self.per_phase is None else int(self.per_phase),
                "timed": timed,
                "cycles": index - self.ctl_cycle,
                "budget_pct": self.pct,
                "t": now,
            }
        self.ctl_t0, self.ctl_cycle = now, index
        return rec

    def info(self, spent, timed, phases):
        """The stats record's "sampling": the rate in effect and the last measurements
        (before the first decision: the cost over the timed cycles so far, no period)."""
        cost, period = self.cost_est, self.period_est
        if cost is None and timed:
            cost = (spent + phases * (self.per_phase or 0.0)) / timed
        host = cost
        if cost is not None and self.visible is not None:
            cost = min(cost, self.visible)
        return {
            "p": self.p,
            "budget_pct": self.pct,
            "cost_ns": None if cost is None else int(cost),
            "host_cost_ns": None if host is None else int(host),
            "visible_ns": None if self.visible is None else int(self.visible),
            "pairs": len(self.pairs),
            "period_ns": None if period is None else int(period),
            "per_phase_ns": None if self.per_phase is None else int(self.per_phase),
            "decisions": self.decisions,
            "changes": self.changes,
        }


# -- the timer, in parts ---------------------------------------------------------------------
# One process's timer is a coordinator (_Timer: the cycle and the phases open now, the module
# functions bound to its methods) of the mode's class, chosen from _TIMERS by the mode's name
# (_HostTimer, _SyncTimer, _EventTimer: how a point is marked, the in-cycle begin/end, how a
# cycle's lines are made), with parts that have one job each: _Writer (the lines waiting, the
# file, the idle flusher), _Resolver (events mode: device work not read yet, the event pool),
# _Sampler (which cycles are timed: PATCHKIT_TIMER_SAMPLE, or the budget's _Budget), _Untimed
# (a cycle the draw left untimed), _OffBlocks / _BareBlocks (PATCHKIT_TIMER_AB's second
# blocks), _Profiler (record_function ranges), _GraphSteps (steps inside captured graphs).
# What the module functions are bound to in each state is one table (_api_table), bound by
# _bind alone (bottom of this file). The parts share the lists they append to (the
# coordinator's out is the writer's), so that no call on the hot path goes through a part it
# does not need.
_COUNTS = (
    "records",
    "skipped_capturing",
    "unmatched_end",
    "abandoned",
    "stale_steps",
    "dropped_pending",
    "writes",
)


class _Writer:
    """The output of one process: the lines waiting for the next write (out: JSON text, or
    the items of untimed and off-block cycles that the write formats, see deferred_line),
    the records outside cycles (buf), the file (opened at the first write, named by the
    rank, renamed when the rank becomes known) and the idle flusher thread."""

    def __init__(self, directory, batch, flush_s, counts, header, t0):
        self.directory = directory
        self.batch = batch
        self.flush_ns = int(flush_s * 1e9)
        self.counts = counts  # the stats record's counts (shared with the timer)
        self.header = header  # () -> the header record, the file's first line
        self.stats_extra: Any = None  # () -> more of the stats record (a budget's), or None
        self.untimed_ab = ',"timed":false'  # the "ab"/"timed" fields of an untimed cycle's line
        self.resolver: _Resolver | None = None  # what the idle flusher reads (events mode)
        self.pid = os.getpid()
        self.last_flush = self.last_write = t0
        self.buf: list = []  # records outside cycles, resolved, not yet written
        self.out: list = []  # JSON text waiting for the next write (in order)
        self.out_records = 0
        self.lock = threading.Lock()  # one writer at a time: this thread or the idle flusher
        self.flusher: threading.Thread | None = None  # first deferred write or timed cycle
        self.idle_s = _env_int("PATCHKIT_TIMER_IDLE_FLUSH_MS", 50) / 1000.0
        self.quoted = {None: "null"}  # phase name -> its JSON string
        self.shapes: dict = {}  # a cycle's phase layout -> the format of its phase lines
        self.path: str | None = None
        self.fd: int | None = None
        self.refresh_rank()  # rank, world, rank_source, rank_final

    def refresh_rank(self):
        self.rank, self.world, self.rank_source = _detect_rank()
        self.rank_final = self.rank_source in ("env:PATCHKIT_TIMER_RANK", "torch.distributed")

    def check_rank(self):
        """torch.distributed initialised since the header: rename the file, say so."""
        found = _dist_rank()
        if found is None:
            return
        self.rank_final = True
        self.rank_source = "torch.distributed"
        old, (self.rank, self.world) = self.rank, found
        if self.fd is None:
            return
        if self.rank != old:
            new_path = self.file_path()
            assert self.path is not None  # (opened with the descriptor)
            os.rename(self.path, new_path)  # the open descriptor follows the file
            self.path = new_path
        self.out.append(
            _json_line(
                {
                    "kind": "rank",
                    "rank": self.rank,
                    "world_size": self.world,
                    "rank_source": self.rank_source,
                    "t": _perf(),
                }
            )
        )

    def file_path(self):
        return os.path.join(self.directory, "%s.rank%d.pid%d.jsonl" % (FILE_PREFIX, self.rank, self.pid))

    def open(self):
        if not self.rank_final:
            self.refresh_rank()
        os.makedirs(self.directory, exist_ok=True)
        path = self.file_path()
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        self.path, self.fd = path, fd
        self.out.insert(0, _json_line(self.header()))

    def outside_done(self, now):
        """A unit outside cycles ended: write when a batch is full or the time has come."""
        if len(self.buf) >= self.batch or now - self.last_flush >= self.flush_ns:
            self.write()

    def write(self, final=False):
        """One write of everything waiting: at most one per cycle."""
        if self.buf:
            names = self.quoted
            self.out.extend(
                _phase_line(rec, names) if type(rec) is list else _json_line(rec) for rec in self.buf
            )
            self.out_records += len(self.buf)
            self.buf = []
        self.last_flush = _perf()
        if final:
            self.counts["records"] += self.out_records
            self.out_records = 0
            self.counts["writes"] += 1
            extra = self.stats_extra() if self.stats_extra is not None else {}
            self.out.append(_json_line(dict(kind="stats", t=_perf(), **self.counts, **extra)))
        if not self.out:
            return
        if self.fd is None:
            self.open()
        self.write_out()
        self.counts["records"] += self.out_records
        self.out_records = 0

    def write_out(self):
        """Write the lines waiting in self.out: the first n, then delete those n (lines this
        thread or another appends meanwhile stay for the next write), under the lock."""
        with self.lock:
            out = self.out
            n = len(out)
            if not n or self.fd is None:
                return
            line = self.deferred_line
            data = "".join([x if x.__class__ is str else line(x) for x in out[:n]]).encode("utf-8")
            view, fd = memoryview(data), self.fd
            while view:
                view = view[os.write(fd, view) :]
            # nothing below can lose a record: a KeyboardInterrupt here repeats it at most
            # (the report drops repeated records)
            del out[:n]
            self.last_write = _perf()
            self.counts["writes"] += 1

    def deferred_write(self):
        """An untimed or off-block cycle's line waits for the next write (a timed cycle's, at
        most one in PATCHKIT_TIMER_SAMPLE on average) instead of costing a system call of its
        own; the idle flusher thread writes it once no write came for PATCHKIT_TIMER_IDLE_FLUSH_MS
        (default 50), so that a SIGKILL after the engine went idle loses nothing."""
        if self.flusher is None or self.fd is None:
            self.write()
            if self.fd is not None and self.flusher is None:
                self.start_flusher()
        elif len(self.out) >= self.batch:
            self.write()

    def deferred_line(self, item):
        """The line of an off-block cycle ((index, t0, kind), t1) or of an untimed cycle
        (index, t0, t1, attrs): formatted by the write, several in a row, not at each
        cycle_end (in a busy engine each cycle_end finds the formatting code out of the
        caches: formatting a line there cost about as much as the rest of the cycle's calls)."""
        if len(item) == 2:
            (index, t0, kind), t1 = item
            return _cycle_line(
                index, t0, t1, None, None, "off", None if kind is None else {"kind": _plain(kind)}
            )
        index, t0, t1, attrs = item
        return _CYCLE_FORMAT % (
            index,
            t0,
            t1,
            t1 - t0,
            "null",
            "null",
            self.untimed_ab,
            _attrs_json(attrs) if attrs else "{}",
        )

    def start_flusher(self):
        pid = os.getpid()
        # events mode: the flusher reads finished events too (a cycle's events are often not
        # done at its cycle_end, and with a resolve batch cycles wait on purpose),
        # on this thread's CUDA device (a CUDA call on a thread with no device set would open
        # a context on device 0 for every rank); not with graph steps (no resolver here: their
        # records go to self.buf, which only the host program's thread writes)
        resolver = self.resolver
        device = None
        if resolver is not None:
            try:
                device = resolver.torch.cuda.current_device()
            except Exception:
                device = None

        def loop():
            idle_ns = int(self.idle_s * 1e9)
            resolving = False
            if device is not None and resolver is not None:
                try:
                    resolver.torch.cuda.set_device(device)
                    # its queries must not touch a graph another thread captures: relaxed
                    # mode; where that cannot be set, only a batch the user asked for reads here
                    resolving = _relax_capture_mode() or resolver.resolve_set > 1
                except Exception:
                    pass
            while _timer is not None and _timer.writer is self and os.getpid() == pid:
                time.sleep(self.idle_s)
                try:
                    if _perf() - self.last_write < idle_ns:
                        continue
                    if resolving and resolver is not None and resolver.busy():
                        # (counts["records"] may miss the few records counted here while
                        # the host program's thread writes: a statistic, not a record)
                        try:
                            resolver.resolve(cycles_only=True)
                        except Exception:  # the lines still go out; the exit flush reads
                            resolving = False
                    if self.out:
                        self.write_out()
                except Exception:  # never raise in the host program's threads
                    return

        thread = threading.Thread(target=loop, name="patchkit-timer-flush", daemon=True)
        self.flusher = thread
        thread.start()

    def close(self):
        if self.fd is not None:
            with self.lock:  # (the idle flusher never writes to a closed descriptor)
                os.close(self.fd)
                self.fd = None


class _Resolver:
    """Events mode: the device work not read yet (pending, a FIFO from head: timed cycles,
    phases outside cycles, start events no later cycle measures a gap from), read in order
    once the GPU passed it, every `every` timed cycles (PATCHKIT_TIMER_RESOLVE_BATCH, else
    about every 16 cycle indices), under a lock (the idle flusher reads too); events go back
    to the pool once read, each once: an event may mark several points, so the rare paths
    that drop records leave theirs to the GC."""

    def __init__(self, writer, counts, graph, torch):
        self.writer = writer
        self.counts = counts
        self.graph = graph
        self.torch = torch
        # PATCHKIT_TIMER_RESOLVE_BATCH as the user set it (0: not set, or not a number);
        # without it the default follows the timed rate (set_default)
        self.resolve_set = _env_int("PATCHKIT_TIMER_RESOLVE_BATCH", 0, minimum=0)
        self.every = self.resolve_set or 1
        self.since = 0
        self.lock = threading.Lock()
        self.pending: list = []
        self.head = 0
        self.pool: list = []

    def set_default(self, p):
        """Without PATCHKIT_TIMER_RESOLVE_BATCH (nor graph steps): device times read about
        every 16 cycle indices, so 16 timed cycles at a time when every cycle is timed, 16p at
        rate p (at least 1: at 1 in 16 or fewer, at each timed cycle)."""
        if not self.resolve_set and self.graph is None:
            self.every = max(1, int(_FULL_RESOLVE_BATCH * p + 1e-9))

    def busy(self):
        return self.head < len(self.pending)

    def cycle_done(self):
        """A timed cycle was added: read the batch when it is due."""
        self.since += 1
        if self.since >= self.every:
            self.since = 0
            self.resolve()
            if len(self.pending) - self.head > _MAX_PENDING:
                self.resolve(block_one=True)
        # else: this cycle's device times wait for the batch (or the idle flusher); its host
        # lines went out like any timed cycle's

    def finish(self):
        """At exit: wait for what is left, once; what cannot be read is counted."""
        with self.lock:  # (the idle flusher resolves too; nothing pending once closed)
            try:
                self.resolve_locked(block_all=True)
            except Exception as exc:  # CUDA may already be torn down at exit
                _warn("could not collect the last CUDA events (%r)" % (exc,))
            self.counts["dropped_pending"] += len(self.pending) - self.head
            self.pending, self.head = [], 0

    def resolve(self, block_one=False, block_all=False, cycles_only=False):
        """Device times of what is done, in order, under self.lock: the idle flusher resolves
        too (cycles_only: it stops at a record outside cycles, whose list this thread owns)."""
        with self.lock:
            self.resolve_locked(block_one, block_all, cycles_only)

    def resolve_locked(self, block_one=False, block_all=False, cycles_only=False):
        """resolve's work (see _cycle); the caller holds self.lock."""
        pending = self.pending
        while self.head < len(pending):
            item = pending[self.head]
            if len(item) == 1:  # a cycle's start event no later cycle measures a gap from
                self.pool.append(item[0])
                pending[self.head] = None
                self.head += 1
                continue
            dev1 = item[2]
            probe = item[-1] if len(item) == 10 else None
            if block_all or block_one:
                dev1.synchronize()
                if probe is not None:
                    probe.synchronize()
                block_one = False
            elif not dev1.query() or (probe is not None and not probe.query()):
                # (both asked first: reading a pending event's time raises, and a raised
                # error costs far more than two queries)
                break
            if len(item) == 4:
                if cycles_only:
                    break
                self._outside(*item)
            elif not self._cycle(*item):
                break  # an event on another stream is not done yet: try again later
            pending[self.head] = None
            self.head += 1
        if self.head > 1024 and self.head * 2 > len(pending):
            del pending[: self.head]
            self.head = 0

    def _outside(self, rec, dev0, dev1, steps):
        rec[_DEV] = _ms_to_ns(dev0.elapsed_time(dev1))
        self.writer.buf.append(rec)
        if steps:
            self.graph.resolve(rec, dev0, steps)
        self.pool += (dev0, dev1)  # outside cycles events are never shared

    def _cycle(self, index, dev0, end_ev, prev, end, marks, evs, recs, later, probe=None):
        """Device times of one cycle, each mark read once (relative to the cycle's start
        event dev0); False when an event (on another stream) is not done yet."""
        since = dev0.elapsed_time
        try:
            offs = [since(ev) for ev in marks]
        except RuntimeError:
            if any(not ev.query() for ev in marks):
                return False
            raise
        # each mark's offset in whole ns first: a phase's end and the next one's start, when
        # one event marks both, give the same number; one % over a template per length
        ns = [int(o * 1e6 + 0.5) if o >= 0 else -int(0.5 - o * 1e6) for o in offs]
        flat: list = []
        for i0, i1, _ in evs:
            o = ns[i0]
            flat += (ns[i1] - o, o)
        n = len(evs)
        fmt = _DEV_PHASES.get(n)
        if fmt is None:
            fmt = _DEV_PHASES[n] = ",".join(["[%d,%d]"] * n)
        phases = fmt % tuple(flat)
        if self.graph is not None:
            for (i0, i1, steps), rec in zip(evs, recs):
                if steps:
                    rec[_DEV] = _ms_to_ns(offs[i1] - offs[i0])
                    rec[_OFF] = _ms_to_ns(offs[i0])
                    self.graph.resolve(rec, marks[i0], steps)
        gap = None if prev is None else _ms_to_ns(prev.elapsed_time(dev0))
        tail = ""
        if later:
            tail = ',"attrs":' + _JSON_ENCODER.encode({k: _plain(v) for k, v in later.items()})
        writer = self.writer
        writer.out.append(
            '{"kind":"dev","cycle":%d,"dev_ns":%d,"dev_gap_ns":%s,"phases":[%s]%s}\n'
            % (index, ns[end], _opt(gap), phases, tail)
        )
        writer.out_records += 1
        pool = self.pool
        pool += marks
        if prev is not None:
            pool.append(prev)  # the previous cycle's start: its last use was this gap
        return True


class _GraphSteps:
    """PATCHKIT_TIMER_GRAPH_STEPS (experimental): phases that run while a CUDA graph is
    captured record external event pairs into the graph (grouped by graph_key); a replay
    phase begin(name, graph=True[, graph_key=K]) reports the captured steps as its child
    phases (flag "captured") once its device times are read."""

    def __init__(self, event, writer, counts):
        self.Event = event  # torch.cuda.Event (its external events pair with their own kind)
        self.writer = writer
        self.counts = counts
        self.stack: list = []
        self.groups: dict = {}
        self.key = None
        self.closed = True  # an uncaptured unit ran since: the next capture is a new one

    def begin(self, name, attrs):
        key = attrs.get("graph_key", self.key)
        if not self.stack and (self.closed or key != self.key):
            self.groups[key] = []  # a new capture replaces what this key held
            self.key = key
            self.closed = False
        ev = self.Event(enable_timing=True, external=True)
        ev.record()
        self.stack.append((name, ev))

    def end(self, name):
        if not self.stack or self.stack[-1][0] != name:
            self.counts["unmatched_end"] += 1
            return
        _, ev0 = self.stack.pop()
        ev1 = self.Event(enable_timing=True, external=True)
        ev1.record()
        self.groups.setdefault(self.key, []).append((name, len(self.stack), ev0, ev1))

    def resolve(self, rec, dev0, steps):
        span = rec[_DEV]
        slack = 2000  # ns: event timestamps have about 0.5 us resolution
        for name, depth, ev0, ev1 in steps:
            off = _ms_to_ns(dev0.elapsed_time(ev0))
            dur = _ms_to_ns(ev0.elapsed_time(ev1))
            if off < -slack or off + dur > span + slack:
                self.counts["stale_steps"] += 1  # overwritten by a later replay
                continue
            base = rec[_OFF]
            self.writer.buf.append(
                [
                    name,
                    rec[_CYCLE],
                    rec[_DEPTH] + 1 + depth,
                    rec[_NAME],
                    None,
                    None,
                    dur,
                    None if base is None else base + off,
                    False,
                    True,
                    None,
                ]
            )


class _Profiler:
    """The torch profiler's ranges: while one records, a timed or untimed cycle and every
    phase in it are record_function ranges too (user annotations in Kineto traces, on the
    GPU lanes as well). mod: torch.autograd.profiler, whose on/off flag is read once a cycle;
    the ranges go through the two ops torch.autograd.profiler.record_function calls."""

    def __init__(self, mod, enter, leave):
        self.mod = mod
        self.rf_enter = lambda name: enter(name, None)
        self.rf_exit = leave
        self.rf_stack: Any = None  # open ranges: (name, handle); [0] the cycle's
        self.rf_inner: tuple = (_noop, _noop)  # the (begin, end) the ranges wrap

    @classmethod
    def create(cls):
        """One when torch and its profiler are loaded, else None."""
        torch = sys.modules.get("torch")
        mod = sys.modules.get("torch.autograd.profiler")
        if torch is None or mod is None or not hasattr(mod, "_is_profiler_enabled"):
            return None
        try:
            ops = torch.ops.profiler
            enter, leave = ops._record_function_enter_new, ops._record_function_exit
            leave = getattr(leave, "_RecordFunction", leave)
        except Exception:
            return None
        return cls(mod, enter, leave)

    def open(self, attrs, inner):
        """A profiler records: a range for the cycle now, one per phase until cycle_end;
        returns the (begin, end) to bind, which wrap `inner`."""
        self.rf_inner = inner
        self.rf_stack = [("", self.rf_enter("cycle %s" % attrs.get("kind", "")))]
        return self.begin, self.end

    def close(self):
        stack, self.rf_stack = self.rf_stack, None
        leave = self.rf_exit
        while stack:
            leave(stack.pop()[1])

    def begin(self, name, **attrs):
        try:
            self.rf_stack.append((name, self.rf_enter(name)))
        except Exception as exc:
            _fail("begin(%r)" % (name,), exc)
            return
        self.rf_inner[0](name, **attrs)

    def end(self, name):
        self.rf_inner[1](name)
        try:
            stack = self.rf_stack
            for idx in range(len(stack) - 1, 0, -1):  # [0]: the cycle's
                if stack[idx][0] == name:
                    leave = self.rf_exit
                    while len(stack) > idx:
                        leave(stack.pop()[1])
                    return
        except Exception as exc:
            _fail("end(%r)" % (name,), exc)


class _Sampler:
    """Which cycles are timed: one seeded draw per cycle index against the rate p_timed,
    fixed by PATCHKIT_TIMER_SAMPLE, or set by PATCHKIT_TIMER_BUDGET's controller (_Budget)
    from the host time the timer spends in timed cycles (measured here: cycle_begin and
    cycle_end of each, begin/end/note in one calibration cycle per window), decided every
    _BUDGET_WINDOW cycle indices."""

    def __init__(self, sample, budget, seed):
        self.sample = sample
        # PATCHKIT_TIMER_BUDGET (percent) when no sample fixes the rate, else None
        self.budget = budget if sample == 1 else None
        seed_value, source = seed if seed is not None else (None, None)
        self.seed: int | None = seed_value
        self.seed_source: str | None = source
        # one seeded draw per cycle index whenever the rate is not fixed at 1 (so that every
        # rank draws the same number for the same index, whatever rate each one has)
        self.sampled = sample > 1 or self.budget is not None
        self.p_timed = 1.0 / sample
        if self.sampled:
            import random

            self.draw = random.Random(self.seed).random
        # host time spent in timed cycles, summed over the window
        self.acc_spent = self.acc_timed = self.acc_phases = 0
        self.cal_acc = [0]  # ns inside begin/end/note of the open calibration cycle
        self.cal_on = False
        self.next_eval = self.cal_at = _NEVER_CYCLE
        # the budget's controller; pairing: its per-cycle bookkeeping, called at each
        # cycle's start (None: nothing to decide)
        self.ctl: _Budget | None = None
        self.pairing = None
        if self.budget is not None:
            self.ctl = _Budget(self.budget)
            self.p_timed = self.ctl.p
            if self.budget > 0:
                self.next_eval, self.cal_at = 0, _BUDGET_CALIBRATE_FROM
                self.pairing = self.ctl.pair
        self.p_start = self.p_timed

    def control(self, now, index):
        """A budget's decision (_Budget.decide), at the first cycle whose index reaches a
        multiple of _BUDGET_WINDOW (every rank decides at the same indices), before that
        cycle's draw; the window's measurements start again from here. Returns the
        "sampling" record to write, or None."""
        self.next_eval = (index // _BUDGET_WINDOW + 1) * _BUDGET_WINDOW
        ctl = self.ctl
        assert ctl is not None
        if ctl.ctl_t0 is None:  # the first cycle opens the first window
            ctl.ctl_t0, ctl.ctl_cycle = now, index
            self.acc_spent = self.acc_timed = self.acc_phases = 0
            return None
        if not ctl.ready(self.acc_timed, self.acc_phases):
            return None
        rec = ctl.decide(now, index, self.acc_spent, self.acc_timed, self.acc_phases)
        self.p_timed = ctl.p
        self.acc_spent = self.acc_timed = self.acc_phases = 0
        self.cal_at = index  # calibrate the window's first timed cycle
        return rec

    def calibrate_open(self, inner_begin, inner_end, inner_note):
        """The first timed cycle of a window: the begin/end/note this cycle would bind,
        wrapped so that the host time inside them is summed until its cycle_end; returns
        the wrappers (the caller binds them; cycle_end binds the "on" row back)."""
        self.cal_at = _NEVER_CYCLE
        self.cal_on = True
        acc = self.cal_acc
        acc[0] = 0

        def begin(name, **attrs):
            t = _perf()
            inner_begin(name, **attrs)
            acc[0] += _perf() - t

        def end(name):
            t = _perf()
            inner_end(name)
            acc[0] += _perf() - t

        def note(**attrs):
            t = _perf()
            inner_note(**attrs)
            acc[0] += _perf() - t

        return begin, end, note

    def calibrate_close(self, phases):
        """(the caller binds the wrapped functions back)"""
        self.cal_on = False
        if phases:
            assert self.ctl is not None  # (calibrated only under a budget)
            self.ctl.calibrated(self.cal_acc[0] / phases)

    def header(self):
        """The header's sampling."""
        info = {
            "every": self.sample if self.budget is None else None,
            "method": "bernoulli",
            "seed": self.seed,
            "seed_source": self.seed_source,
        }
        if self.budget is not None:
            info.update(
                p=self.p_start,
                budget_pct=self.budget,
                controller=_Budget.describe(),
            )
        return info

    def stats(self):
        """The stats record's sampling (under a budget)."""
        assert self.ctl is not None  # (the writer asks only under a budget)
        return {"sampling": self.ctl.info(self.acc_spent, self.acc_timed, self.acc_phases)}


class _Untimed:
    """A cycle the draw left untimed: recorded with its host times and attrs only. Until its
    cycle_end the module functions are the "untimed" row (_api_table): begin/end the no-op,
    note() the cycle's own dict update (no Python frame), cycle_end this object's."""

    def __init__(self, timer):
        self.timer = timer
        self.writer = timer.writer
        self.cycle: Any = None  # the open one: [index, t0, attrs]

    def begin(self, t0, attrs):
        timer = self.timer
        self.cycle = [timer.cycle_no, t0, attrs]
        if timer.prev_cycle_dev is not None:
            if timer.resolver is not None:  # the last timed cycle's start: back to the pool after it
                timer.resolver.pending.append((timer.prev_cycle_dev,))
            timer.prev_cycle_dev = None  # a gap over untimed cycles means nothing
        begin = end = None  # the row's no-op, unless the profiler's ranges wrap it
        prof = timer.profiler
        if prof is not None and prof.mod._is_profiler_enabled:
            begin, end = prof.open(attrs, (_noop, _noop))
        _bind("untimed", timer, begin, end, attrs.update)

    def cycle_end(self, **attrs):
        try:
            t1 = _perf()
            timer = self.timer
            _bind("on", timer)
            index, t0, merged = self.cycle
            self.cycle = None
            prof = timer.profiler
            if prof is not None and prof.rf_stack is not None:
                prof.close()
            if attrs:
                merged.update(attrs)
            # formatted by the write (_Writer.deferred_line); what must not wait is left out now
            writer = self.writer
            writer.out.append((index, t0, t1, _untimed_attrs(merged) if merged else None))
            writer.out_records += 1
            if timer.graph is not None:
                timer.graph.closed = True
            if not writer.rank_final and (index & 15 == 0 or writer.fd is None):
                writer.check_rank()
            writer.deferred_write()
        except Exception as exc:
            _fail("cycle_end()", exc)

    def abandon(self):
        self.cycle = None
        timer = self.timer
        prof = timer.profiler
        if prof is not None and prof.rf_stack is not None:
            prof.close()
        timer.counts["abandoned"] += 1
        _bind("on", timer)


class _OffBlocks:
    """PATCHKIT_TIMER_AB's second blocks: the timer off but for each cycle's host start and
    end (its line formatted by a later write); begin/end/note are the no-op meanwhile. The
    first cycle past the block's end binds the timer back (_Timer.ab_switch)."""

    def __init__(self, timer):
        self.timer = timer
        self.writer = timer.writer
        self.out = timer.out
        self.ab = timer.ab
        self.pid = timer.pid
        self.capturing = timer.capturing
        self.counts = timer.counts
        self.open: tuple | None = None  # the open cycle: (index, t0, kind)

    def cycle_begin(self, **attrs):
        try:
            if os.getpid() != self.pid:
                return _after_fork_call(attrs)
            if self.capturing():
                self.counts["skipped_capturing"] += 1
                return None
            timer = self.timer
            if not (timer.cycle_no + 1) // self.ab % 2:
                timer.ab_switch(on=True)
                return timer.cycle_begin(**attrs)
            t0 = _perf()
            timer.cycle_no += 1
            self.open = (timer.cycle_no, t0, attrs.get("kind"))
        except Exception as exc:
            _fail("cycle_begin()", exc)
        return None

    def cycle_end(self, **attrs):
        try:
            opened = self.open
            if opened is not None:
                self.out.append((opened, _perf()))  # formatted by the write (deferred_line)
                self.open = None
                writer = self.writer
                writer.out_records += 1
                writer.deferred_write()
        except Exception as exc:
            _fail("cycle_end()", exc)


class _BareBlocks(_OffBlocks):
    """PATCHKIT_TIMER_AB_B=bare: an off block's cycle records its start and kind only (its
    cycle_end is the no-op; no capture probe), so that the pairs measure what recording a
    cycle costs too. Written as an off cycle whose end is its start (t1 = t0)."""

    cycle_end = staticmethod(_noop)

    def cycle_begin(self, **attrs):
        try:
            if _NO_FORK_HOOK and os.getpid() != self.pid:
                return _after_fork_call(attrs)
            timer = self.timer
            index = timer.cycle_no + 1
            if not index // self.ab % 2:
                timer.ab_switch(on=True)
                return timer.cycle_begin(**attrs)
            timer.cycle_no = index
            t0 = _perf()
            out = self.out
            out.append(((index, t0, attrs.get("kind")), t0))  # formatted by the write
            writer = self.writer
            writer.out_records += 1
            if len(out) >= writer.batch:  # a long bare block: its lines still go out in batches
                writer.write()
        except Exception as exc:
            _fail("cycle_begin()", exc)
        return None


class _Timer:
    """The coordinator of one process's timer: the open cycle and phases, the module
    functions bound to its methods (begin/end rebound to the mode's in-cycle variants while
    a timed cycle is open), the parts above. A mode's class (_TIMERS) adds how a point is
    marked (_mark), the device side of a phase record (_device_times), its in-cycle
    begin/end and how a cycle's lines are made (_end_cycle)."""

    MODE = "host"
    CUDA = False  # the mode marks points on the device (torch imported, the device named)
    MARKS = False  # events mode: a cycle's events kept in record order (marks)
    graph: "_GraphSteps | None"
    resolver: "_Resolver | None"
    event_api: "str | None"
    blocks: "_OffBlocks | None"
    marks: "Any"

    def __init__(
        self,
        requested,
        directory,
        graph_steps,
        batch,
        flush_s,
        ab=0,
        nvtx=False,
        event_api=None,
        share_ns=1000,
        sample=1,
        seed=None,
        ab_b="off",
        budget=None,
    ):
        self.mode = self.MODE  # (an instance attribute: the hot path reads it)
        self.requested = requested
        self.share_ns = share_ns
        self.counts = dict.fromkeys(_COUNTS, 0)
        self.host_t0 = _perf()
        self.wall_t0 = time.time_ns()
        self.writer = _Writer(directory, batch, flush_s, self.counts, self.header, self.host_t0)
        self.pid = self.writer.pid
        self.out = self.writer.out  # one list: the timer appends, the writer writes
        self.quoted, self.shapes = self.writer.quoted, self.writer.shapes
        self.sampler = _Sampler(sample, budget, seed)
        if self.sampler.budget is not None:
            self.writer.stats_extra = self.sampler.stats
        self.stack = []  # open phases: [name, t0, dev_start, attrs, graph]
        self.cycle = None  # open timed cycle: [index, t0, dev_start, attrs]
        self.cyc_recs = []  # phase records of the open cycle
        self.cyc_evs = []  # their (mark0, mark1, steps), events mode (indices into marks)
        self.cycle_no = -1
        self.prev_cycle_dev = None
        self.torch = _torch_if_loaded(import_it=self.CUDA)
        self.capturing = self._capture_probe()
        self._ab_setup(ab, ab_b, sample)
        self.graph = self.resolver = self.event_api = None
        self._setup(graph_steps, event_api, share_ns)  # the mode's own
        self.push = self.pop = None
        if nvtx:
            self._nvtx_setup()
        self.profiler = _Profiler.create()
        self.untimed = _Untimed(self)
        self.rebound = False  # a row other than "on" bound for the open timed cycle
        self.general = (self.begin, self.end)
        # the (begin, end) bound while a timed cycle is open (None: the general ones)
        self.in_cycle = self._in_cycle() if self.push is None and self.graph is None else None
        self.api = _api_table(self)  # state -> what the module functions are bound to

    # -- set-up ----------------------------------------------------------------------------
    def _setup(self, graph_steps, event_api, share_ns):
        """The mode's own parts."""

    def _in_cycle(self):
        return None

    def _ab_setup(self, ab, ab_b, sample):
        self.ab = ab
        # PATCHKIT_TIMER_AB_B=sample: the second blocks sampled (not off), the first full
        self.ab_sampled = bool(ab) and sample > 1 and ab_b == "sample"
        # PATCHKIT_TIMER_AB_B=bare: off blocks record only each cycle's start
        self.ab_bare = bool(ab) and ab_b == "bare"
        self.cycle_b = False  # the open timed cycle is in a sampled second block
        if ab:
            self.writer.untimed_ab = (
                ',"ab":"sampled","timed":false' if self.ab_sampled else ',"ab":"events","timed":false'
            )
        self.blocks = None  # the off (or bare) blocks' cycle_begin/cycle_end
        if ab and not self.ab_sampled:
            self.blocks = _BareBlocks(self) if self.ab_bare else _OffBlocks(self)

    def _capture_probe(self):
        torch = self.torch or sys.modules.get("torch")
        # the C function itself when exposed: the Python wrapper costs as much again
        probe = getattr(getattr(torch, "_C", None), "_cuda_isCurrentStreamCapturing", None) or getattr(
            getattr(torch, "cuda", None), "is_current_stream_capturing", None
        )
        if probe is None:
            return lambda: False
        try:
            probe()
        except Exception:
            return lambda: False
        return probe

    def _nvtx_setup(self):
        torch = sys.modules.get("torch")
        nvtx = getattr(getattr(torch, "cuda", None), "nvtx", None)
        if nvtx is None:
            _warn("PATCHKIT_TIMER_NVTX=1 but torch is not imported; no NVTX ranges")
            return
        self.push, self.pop = nvtx.range_push, nvtx.range_pop

    # -- the mode's: a point marked; a timed cycle's lines -----------------------------------
    def _mark(self, now):
        return None

    def _end_cycle(self, cycle, merged, recs, ab):
        """The end of a timed cycle (host mode): its phase lines and its cycle line."""
        t1 = _perf()
        if self.pop is not None:
            self.pop()
        out = self.out
        if recs:
            out.append(_host_phase_lines(recs, self.quoted, self.shapes))
        out.append(_cycle_line(cycle[0], cycle[1], t1, None, None, ab, merged))
        self.writer.out_records += len(recs) + 1

    # -- abandoned work ------------------------------------------------------------------
    def _abandon_stack(self, keep=0):
        while len(self.stack) > keep:
            self.stack.pop()
            self.counts["abandoned"] += 1
            if self.pop is not None:
                self.pop()

    def _abandon_cycle(self):
        """A cycle that never ended: its phases are kept with host times only."""
        self.counts["abandoned"] += 1
        names = self.quoted
        self.out.extend(_phase_line(rec, names) for rec in self.cyc_recs)
        self.writer.out_records += len(self.cyc_recs)
        self.cyc_recs, self.cyc_evs = [], []
        self.marks, self.last_t = None, _NEVER
        self.cycle = None
        if self.pop is not None:
            self.pop()
        prof = self.profiler
        if prof is not None and prof.rf_stack is not None:
            prof.close()
        if self.rebound:  # (a calibration cycle's note too)
            _bind("on", self)
            self.rebound = False
        sampler = self.sampler
        if sampler.cal_on:  # its calls measured nothing usable
            sampler.cal_on = False
            sampler.cal_at = self.cycle_no + 1

    # -- public API ----------------------------------------------------------------------
    def begin(self, name, **attrs):
        try:
            if self.cycle is None and self.capturing():
                if self.graph is not None:
                    self.graph.begin(name, attrs)
                else:
                    self.counts["skipped_capturing"] += 1
                return
            if self.push is not None:
                self.push(name)
            t0 = _perf()
            graph = bool(attrs.pop("graph", False)) if attrs else False
            self.stack.append([name, t0, self._mark(t0), attrs, graph])
        except Exception as exc:
            _fail("begin(%r)" % (name,), exc)

    def end(self, name):
        """The general end (outside cycles, and inside them where no fast pair is bound: sync
        mode, NVTX, graph steps); the mode adds the device times (_device_times)."""
        try:
            cycle = self.cycle
            if cycle is None and self.capturing():
                if self.graph is not None:
                    self.graph.end(name)
                return
            t1 = _perf()
            dev1 = self._mark(t1)
            stack = self.stack
            if not stack or stack[-1][0] != name:
                for idx in range(len(stack) - 1, -1, -1):
                    if stack[idx][0] == name:
                        self._abandon_stack(keep=idx + 1)
                        break
                else:
                    self.counts["unmatched_end"] += 1
                    return
            if self.pop is not None:
                self.pop()
            _, t0, dev0, attrs, graph = stack.pop()
            # a phase record is a list (cheap to build and to format; see _phase_line)
            rec = [
                name,
                cycle[0] if cycle else None,
                len(stack),
                stack[-1][0] if stack else None,
                t0,
                t1,
                None,
                None,
                graph,
                False,
                _plain_attrs(attrs) if attrs else None,
            ]
            if self._device_times(rec, cycle, stack, t1, dev0, dev1, attrs):
                return  # (events mode: the record waits for its events)
            if cycle is not None:
                self.cyc_recs.append(rec)
                return
            self.writer.buf.append(rec)
            if not stack:
                self.writer.outside_done(t1)
        except Exception as exc:
            _fail("end(%r)" % (name,), exc)

    def _device_times(self, rec, cycle, stack, t1, dev0, dev1, attrs):
        """The mode's device side of a phase record from end() (dev0/dev1: _mark's); True
        when the mode took the record over. Host mode: none."""
        return False

    def cycle_begin(self, **attrs):
        try:
            if _NO_FORK_HOOK and os.getpid() != self.pid:
                return _after_fork_call(attrs)
            if self.capturing():
                self.counts["skipped_capturing"] += 1
                return None
            second = False
            if self.ab and (self.cycle_no + 1) // self.ab % 2:
                if not self.ab_sampled:
                    self.ab_switch(on=False)
                    return cycle_begin(**attrs)  # the module's, now the off block's (or bare one's)
                second = True
            t0 = _perf()
            untimed = self.untimed
            if untimed.cycle is not None:
                untimed.abandon()
            if self.stack:
                self._abandon_stack()
            if self.cycle is not None:
                self._abandon_cycle()
            self.cycle_no += 1
            sampler = self.sampler
            if self.cycle_no >= sampler.next_eval:  # a budget's decision, every 64 cycle indices
                self._control(t0)
            timed = not (
                sampler.sampled and (second or not self.ab_sampled) and sampler.draw() >= sampler.p_timed
            )
            if sampler.pairing is not None:
                sampler.pairing(self.cycle_no, t0, timed, attrs.get("kind"))
            if not timed:
                return untimed.begin(t0, attrs)
            self.cycle_b = second
            if self.push is not None:
                self.push("cycle %s" % attrs.get("kind", ""))
            self.cycle = [self.cycle_no, t0, self._mark(t0), attrs]
            if self.MARKS:  # the start event is not a mark: it outlives the cycle
                self.marks, self.last_t = [], _NEVER
            begin = end = note = None  # the "timed" row's, unless wrapped for this cycle
            prof = self.profiler
            if prof is not None and prof.mod._is_profiler_enabled:
                begin, end = prof.open(attrs, self.in_cycle or self.general)
            if self.cycle_no >= sampler.cal_at:
                if begin is None:
                    begin, end = self.in_cycle or self.general
                begin, end, note = sampler.calibrate_open(begin, end, self.note)
            if begin is not None or self.in_cycle is not None:
                _bind("timed", self, begin, end, note)
                self.rebound = True  # cycle_end binds the "on" row back
            sampler.acc_spent += _perf() - t0
        except Exception as exc:
            _fail("cycle_begin()", exc)
        return None

    def cycle_end(self, **attrs):
        try:
            te = _perf()
            cycle = self.cycle
            if cycle is None:  # (the capture probe only here: no capture inside a cycle)
                if not self.capturing():
                    self.counts["unmatched_end"] += 1
                return
            if self.rebound:  # (a calibration cycle's note too)
                _bind("on", self)
                self.rebound = False
            sampler = self.sampler
            if sampler.cal_on:
                sampler.calibrate_close(len(self.cyc_recs))
            prof = self.profiler
            if prof is not None and prof.rf_stack is not None:
                prof.close()
            if self.stack:
                self._abandon_stack()
            merged = cycle[3]
            if attrs:
                merged.update(attrs)
            recs = self.cyc_recs
            self._end_cycle(
                cycle, merged, recs, ("sampled" if self.cycle_b else "events") if self.ab else None
            )
            self.cyc_recs, self.cyc_evs = [], []
            self.prev_cycle_dev = cycle[2]
            self.cycle = None
            writer = self.writer
            if not writer.rank_final and (cycle[0] & 15 == 0 or writer.fd is None):
                writer.check_rank()
            writer.write()
            if writer.flusher is None and self.resolver is not None and writer.fd is not None:
                writer.start_flusher()  # this cycle's device times may be read only later
            sampler.acc_spent += _perf() - te
            sampler.acc_timed += 1
            sampler.acc_phases += len(recs)
        except Exception as exc:
            _fail("cycle_end()", exc)

    def note(self, **attrs):
        try:
            if self.cycle is not None:
                self.cycle[3].update(attrs)
            elif attrs and not self.capturing():
                self.writer.buf.append(
                    {"kind": "note", "t": _perf(), "attrs": {k: _plain(v) for k, v in attrs.items()}}
                )
        except Exception as exc:
            _fail("note()", exc)

    # -- PATCHKIT_TIMER_BUDGET: a decision; PATCHKIT_TIMER_AB: the blocks switched -----------
    def _control(self, now):
        rec = self.sampler.control(now, self.cycle_no)
        resolver = self.resolver
        if resolver is not None:
            resolver.set_default(self.sampler.p_timed)
        if rec is not None:
            if resolver is not None:
                rec["resolve_batch"] = resolver.every
            self.out.append(_json_line(rec))
            self.writer.out_records += 1

    def ab_switch(self, on):
        blocks = self.blocks
        assert blocks is not None  # (only with PATCHKIT_TIMER_AB's off or bare blocks)
        if on:
            if blocks.open is not None:
                self.counts["abandoned"] += 1
                blocks.open = None
            self.prev_cycle_dev = None  # the gap over an off block means nothing
            _bind("on", self)
        else:
            if self.untimed.cycle is not None:
                self.untimed.abandon()
            self._abandon_stack()
            if self.cycle is not None:
                self._abandon_cycle()
            _bind("off_block", self)

    # -- the header; the final flush ------------------------------------------------------
    def header(self):
        torch = self.torch or sys.modules.get("torch")
        device = None
        if self.CUDA:
            try:
                assert torch is not None
                device = torch.cuda.get_device_name()
            except Exception:
                device = None
        try:
            impl = time.get_clock_info("perf_counter").implementation
        except Exception:
            impl = None
        writer, sampler, resolver = self.writer, self.sampler, self.resolver
        return {
            "kind": "header",
            "schema": SCHEMA,
            "mode": self.mode,
            "requested_mode": self.requested,
            "rank": writer.rank,
            "rank_source": writer.rank_source,
            "world_size": writer.world,
            "pid": self.pid,
            "host": socket.gethostname(),
            "python": sys.version.split()[0],
            "torch": getattr(torch, "__version__", None),
            "cuda_device": device,
            "graph_steps": self.graph is not None,
            "ab_cycles": self.ab,
            **({"ab_b": "sample"} if self.ab_sampled else {"ab_b": "bare"} if self.ab_bare else {}),
            "nvtx": self.push is not None,
            "event_api": self.event_api,
            "share_ns": self.share_ns if resolver is not None else None,
            "resolve_batch": resolver.every if resolver is not None else None,
            **({"sampling": sampler.header()} if sampler.sampled else {}),
            "clock": {
                "host": "time.perf_counter_ns",
                "host_impl": impl,
                "host_t0_ns": self.host_t0,
                "wall_t0_ns": self.wall_t0,
                "boot_id": _boot_id(),
                "device": {
                    "events": "cuda event elapsed_time (float ms, ~0.5 us)",
                    "sync": "torch.cuda.synchronize + perf_counter_ns",
                }.get(self.mode),
            },
            "argv": list(sys.argv[:8]),
        }

    def pending_work(self):
        """Anything to write at exit (the stats record too, once a file or a cycle exists)."""
        writer = self.writer
        return bool(
            writer.fd is not None
            or writer.out
            or writer.buf
            or (self.resolver is not None and self.resolver.busy())
            or self.cycle_no >= 0
        )

    def flush(self, final=False):
        if final and self.resolver is not None:
            self.resolver.finish()
        if final:
            if self.untimed.cycle is not None:
                self.untimed.abandon()
            blocks = self.blocks
            if blocks is not None and blocks.open is not None:
                blocks.open = None
                self.counts["abandoned"] += 1
        self.writer.write(final=final)
        if final:
            self.writer.close()


class _HostTimer(_Timer):
    """PATCHKIT_TIMER=host: the host clock only."""

    MODE = "host"

    def _in_cycle(self):
        return self._host_begin, self._host_end

    # -- inside a timed cycle: begin/end without the checks only calls outside need -----
    # (bound at cycle_begin when neither NVTX nor graph steps are on; the runtime assumes
    # no capture inside a cycle; anything unusual goes to the general begin/end). The event
    # record and the phase record are written out in each of the four (here and in
    # _EventTimer) on purpose, not shared through a helper: every extra call is a frame per
    # timer call, and in a busy engine each frame is fetched cold (bench/timer_cold_cost.py).
    def _host_begin(self, name, **attrs):
        try:
            self.stack.append(
                [name, _perf(), None, attrs, bool(attrs.pop("graph", False)) if attrs else False]
            )
        except Exception as exc:
            _fail("begin(%r)" % (name,), exc)

    def _host_end(self, name):
        try:
            t1 = _perf()
            stack = self.stack
            if not stack or stack[-1][0] != name:
                return self.end(name)
            _, t0, _, attrs, graph = stack.pop()
            self.cyc_recs.append(
                [
                    name,
                    self.cycle_no,
                    len(stack),
                    stack[-1][0] if stack else None,
                    t0,
                    t1,
                    None,
                    None,
                    graph,
                    False,
                    _plain_attrs(attrs) if attrs else None,
                ]
            )
        except Exception as exc:
            _fail("end(%r)" % (name,), exc)
        return None


class _SyncTimer(_Timer):
    """PATCHKIT_TIMER=sync: torch.cuda.synchronize() then the host clock at every mark
    (slow, for comparison only); the device time of a phase is that clock's."""

    MODE = "sync"
    CUDA = True

    def _setup(self, graph_steps, event_api, share_ns):
        self.sync = self.torch.cuda.synchronize

    def _mark(self, now):
        self.sync()
        return _perf()

    def _device_times(self, rec, cycle, stack, t1, dev0, dev1, attrs):
        """Known already: the synchronised clock's."""
        rec[_DEV] = dev1 - dev0
        anchor = cycle[2] if cycle else None
        rec[_OFF] = dev0 - anchor if anchor is not None else None
        return False

    def _end_cycle(self, cycle, merged, recs, ab):
        t1 = _perf()
        dev1 = self._mark(t1)
        if self.pop is not None:
            self.pop()
        dev0 = cycle[2]
        dev = dev1 - dev0
        gap = None if self.prev_cycle_dev is None else dev0 - self.prev_cycle_dev
        names = self.quoted
        out = self.out
        out.extend([_cycle_phase_line(rec, names) for rec in recs])
        out.append(_cycle_line(cycle[0], cycle[1], t1, dev, gap, ab, merged))
        self.writer.out_records += len(recs) + 1


class _EventTimer(_Timer):
    """PATCHKIT_TIMER=events: CUDA events around every phase, read later (_Resolver). Inside
    a cycle, a begin/end within share_ns of host time after the previous event record
    returned shares that event (no GPU work can have been queued in between)."""

    MODE = "events"
    CUDA = True
    MARKS = True
    resolver: "_Resolver"

    def _setup(self, graph_steps, event_api, share_ns):
        self.marks = None  # the open cycle's events in record order
        self.last_t = _NEVER  # when the last record returned
        self.Event = self.torch.cuda.Event
        if graph_steps and _event_supports_external(self.torch):
            self.graph = _GraphSteps(self.Event, self.writer, self.counts)
        self.resolver = _Resolver(self.writer, self.counts, self.graph, self.torch)
        if self.graph is None:
            self.writer.resolver = self.resolver
        self.pool = self.resolver.pool  # (one list: the resolver gives events back to it)
        self.new_event = self._event_factory(event_api)
        self.resolver.set_default(self.sampler.p_timed)

    def _in_cycle(self):
        return self._event_begin, self._event_end

    def _event_factory(self, api):
        """torch.Event records on the current stream inside C++; torch.cuda.Event.record()
        builds a Python Stream object first, several microseconds per call. Graph steps need
        torch.cuda.Event throughout (its external events only pair with their own kind)."""
        generic = getattr(self.torch, "Event", None)
        if generic is not None and self.graph is None and api != "torch.cuda.Event":
            try:
                generic(device="cuda", enable_timing=True)
                self.event_api = "torch.Event"
                return lambda: generic(device="cuda", enable_timing=True)
            except Exception:
                pass
        self.event_api = "torch.cuda.Event"
        return lambda: self.Event(enable_timing=True)

    def _mark(self, now):
        """An event recorded at this point of the stream; inside a cycle, its index in the
        cycle's marks. Inside a cycle, when less than share_ns of host time passed since
        the last record returned, nothing can have been queued in between (a kernel launch
        costs more): the last event marks this point too."""
        marks = self.marks
        if marks is not None and now - self.last_t < self.share_ns:
            return len(marks) - 1
        pool = self.pool
        ev = pool.pop() if pool else self.new_event()
        ev.record()
        if marks is None:
            return ev
        marks.append(ev)
        self.last_t = _perf()
        return len(marks) - 1

    def _device_times(self, rec, cycle, stack, t1, dev0, dev1, attrs):
        """Read later: the record waits for its events, with its cycle's or resolved in turn."""
        steps = None
        if rec[_GRAPH] and self.graph is not None:  # a graph phase: its captured steps' events
            steps = self.graph.groups.get(attrs.get("graph_key") if attrs else None)
        if cycle is not None:
            self.cyc_recs.append(rec)
            self.cyc_evs.append((dev0, dev1, steps))
            return True
        self.resolver.pending.append((rec, dev0, dev1, steps))
        if not stack:
            if self.graph is not None:
                self.graph.closed = True
            self.resolver.resolve()
            self.writer.outside_done(t1)
        return True

    def _end_cycle(self, cycle, merged, recs, ab):
        later = None
        scalars = _SCALARS
        for key, value in merged.items():
            if type(value) not in scalars and _is_cuda_tensor(value):
                # copied without waiting; written once resolved
                if later is None:
                    later = {}
                later[key] = value.detach().to("cpu", non_blocking=True)
        if later:
            merged = {k: v for k, v in merged.items() if k not in later}
        t1 = _perf()
        dev1 = self._mark(t1)
        marks, self.marks = self.marks, None
        if self.pop is not None:
            self.pop()
        index, t0, dev0 = cycle[0], cycle[1], cycle[2]
        out = self.out
        if recs:
            out.append(_host_phase_lines(recs, self.quoted, self.shapes))
        out.append(_cycle_line(index, t0, t1, None, None, ab, merged))
        self.writer.out_records += len(recs) + 1
        # the latest mark before the end event: on another stream than the end event
        # (SGLang's v2 worker times its phases on its forward stream, the cycle on the
        # scheduler's), it may still be pending when the end event is done
        probe = marks[-2] if len(marks) > 1 else None
        resolver = self.resolver
        resolver.pending.append(
            (index, dev0, marks[dev1], self.prev_cycle_dev, dev1, marks, self.cyc_evs, recs, later, probe)
        )
        if self.graph is not None:
            self.graph.closed = True  # an uncaptured unit ran: the next capture is a new one
        resolver.cycle_done()

    # -- inside a timed cycle (see _HostTimer) ----------------------------------------------
    def _event_begin(self, name, **attrs):
        try:
            t0 = _perf()
            marks = self.marks
            if t0 - self.last_t >= self.share_ns:
                pool = self.pool
                ev = pool.pop() if pool else self.new_event()
                ev.record()
                marks.append(ev)
                self.last_t = _perf()
            self.stack.append(
                [name, t0, len(marks) - 1, attrs, bool(attrs.pop("graph", False)) if attrs else False]
            )
        except Exception as exc:
            _fail("begin(%r)" % (name,), exc)

    def _event_end(self, name):
        try:
            t1 = _perf()
            stack = self.stack
            if not stack or stack[-1][0] != name:
                return self.end(name)
            marks = self.marks
            if t1 - self.last_t >= self.share_ns:
                pool = self.pool
                ev = pool.pop() if pool else self.new_event()
                ev.record()
                marks.append(ev)
                self.last_t = _perf()
            _, t0, i0, attrs, graph = stack.pop()
            self.cyc_recs.append(
                [
                    name,
                    self.cycle_no,
                    len(stack),
                    stack[-1][0] if stack else None,
                    t0,
                    t1,
                    None,
                    None,
                    graph,
                    False,
                    _plain_attrs(attrs) if attrs else None,
                ]
            )
            self.cyc_evs.append((i0, len(marks) - 1, None))
        except Exception as exc:
            _fail("end(%r)" % (name,), exc)
        return None


_TIMERS = {"host": _HostTimer, "sync": _SyncTimer, "events": _EventTimer}


# -- module state and binding --------------------------------------------------------------
_timer = None
_failed = False
_API = ("begin", "end", "cycle_begin", "cycle_end", "note")  # the module functions, a row's order


def _api_table(timer=None):
    """The one table of what the module functions are bound to: state -> its row, one
    function per name of _API in that order; _bind binds one row, all five names at once.

    Without a timer, the process's states (the rows in _ROWS):
      off        timing off (PATCHKIT_TIMER=off, configure(mode="off")), failed or shut
                 down: the no-op itself, so that no frame of this module runs
      lazy       not configured yet: the first call configures (_activate), then calls the
                 function that bound
    A timer's states (built once, when it starts: _Timer.api):
      on         no cycle open, or a timed cycle where the mode has no in-cycle pair (sync
                 mode, NVTX, graph steps): the coordinator's methods
      timed      a timed cycle is open: begin/end the mode's in-cycle variants (_in_cycle),
                 without the checks that only calls outside a cycle need
      untimed    a cycle the draw left untimed is open: begin/end the no-op, cycle_end
                 _Untimed's, note the open cycle's attrs.update (given to _bind each cycle)
      off_block  an off (or bare) block of PATCHKIT_TIMER_AB: begin/end/note the no-op,
                 cycle_begin/cycle_end the blocks'
    For one cycle _bind may replace a row's begin/end (the profiler's ranges, _Profiler.open)
    and note (a calibration cycle's clocked wrappers, _Sampler.calibrate_open)."""
    if timer is None:
        rows = {
            "off": (_noop, _noop, _noop, _noop, _noop),
            "lazy": (_lazy_begin, _lazy_end, _lazy_cycle_begin, _lazy_cycle_end, _lazy_note),
        }
    else:
        t = timer
        in_cycle = t.in_cycle or t.general
        rows = {
            "on": (t.begin, t.end, t.cycle_begin, t.cycle_end, t.note),
            "timed": (in_cycle[0], in_cycle[1], t.cycle_begin, t.cycle_end, t.note),
            "untimed": (_noop, _noop, t.cycle_begin, t.untimed.cycle_end, _noop),
        }
        if t.blocks is not None:
            rows["off_block"] = (_noop, _noop, t.blocks.cycle_begin, t.blocks.cycle_end, _noop)
    return rows


def _bind(state, timer=None, begin=None, end=None, note=None):
    """Bind the module functions to the row `state` of the binding table (_api_table): one of
    _ROWS without a timer, else one of the timer's. begin/end (both) and note, when given,
    replace the row's for the cycle that opens. The only code that binds the module
    functions: every switch calls it (configure, shutdown, a failure, a fork, a cycle's begin
    and end, a block's boundary), and the functions it binds are the parts' own (or the no-op
    itself), so that a call through the module runs no dispatch. (Stored one by one, in _API's
    order: cheaper than dict.update at a cycle's begin and end.)"""
    bound = globals()
    (bound["begin"], bound["end"], bound["cycle_begin"], bound["cycle_end"], bound["note"]) = (
        _ROWS[state] if timer is None else timer.api[state]
    )
    if begin is not None:
        bound["begin"], bound["end"] = begin, end
    if note is not None:
        bound["note"] = note


def _relax_capture_mode():
    """Put the calling thread in CUDA's relaxed stream-capture mode (the driver's
    cuThreadExchangeStreamCaptureMode): an event query from a thread in the default (global)
    mode while another thread captures a CUDA graph in global mode (torch's default) fails and
    invalidates that capture; from a relaxed thread it is allowed and harmless (PyTorch's NCCL
    watchdog does the same for its queries). True when it was set."""
    try:
        import ctypes

        mode = ctypes.c_int(2)  # CU_STREAM_CAPTURE_MODE_RELAXED
        return ctypes.CDLL("libcuda.so.1").cuThreadExchangeStreamCaptureMode(ctypes.byref(mode)) == 0
    except Exception:
        return False


def _fail(where, exc):
    global _timer, _failed
    try:
        if not _failed:
            writer = getattr(_timer, "writer", None)
            path = getattr(writer, "path", None) or getattr(writer, "directory", "?")
            _warn(
                "%s failed (%s: %s; timing files: %s); timing is off for pid %d"
                % (where, type(exc).__name__, exc, path, os.getpid())
            )
        _failed = True
        _bind("off")
        timer, _timer = _timer, None
        writer = getattr(timer, "writer", None)
        fd = getattr(writer, "fd", None)
        if writer is not None and fd is not None:
            if writer.lock.acquire(timeout=1.0):
                writer.fd = None
                writer.lock.release()
            os.close(fd)
    except Exception:
        pass


def _choose_mode(requested):
    torch = _torch_if_loaded(import_it=requested in ("events", "sync"))
    if requested is None:
        return "events" if _cuda_ready(torch) else "host"
    if requested in ("events", "sync"):
        try:
            if torch is None or not torch.cuda.is_available():
                _warn("PATCHKIT_TIMER=%s needs CUDA; recording host time only" % requested)
                return "host"
        except Exception:
            return "host"
    return requested


def _sample_every():
    """PATCHKIT_TIMER_SAMPLE as a fixed rate (1: every cycle), or None when it is not set
    (then PATCHKIT_TIMER_BUDGET decides)."""
    raw = os.environ.get("PATCHKIT_TIMER_SAMPLE", "").strip()
    if raw == "":
        return None
    if raw in ("0", "1"):
        return 1
    if raw.isdigit():
        return int(raw)
    _warn("PATCHKIT_TIMER_SAMPLE=%r is not a whole number >= 1; timing every cycle" % raw)
    return 1


def _budget_pct():
    """PATCHKIT_TIMER_BUDGET: a percent >= 0 ("1", "0.5", "2%"); default 1 (also, with a
    warning, for anything else). 0 times no cycle."""
    raw = os.environ.get("PATCHKIT_TIMER_BUDGET", "").strip()
    if raw == "":
        return _BUDGET_DEFAULT
    try:
        value = float(raw[:-1] if raw.endswith("%") else raw)
    except ValueError:
        value = -1.0
    if not 0.0 <= value < float("inf"):  # (also false for nan)
        _warn("PATCHKIT_TIMER_BUDGET=%r is not a percent >= 0; using %g" % (raw, _BUDGET_DEFAULT))
        return _BUDGET_DEFAULT
    return value


def _median(values):
    ordered = sorted(values)
    n = len(ordered)
    mid = n // 2
    return ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0


def _level(p):
    """The smallest k with 2**-k <= p, within 0.._BUDGET_MAX_LEVEL."""
    k = 0
    while k < _BUDGET_MAX_LEVEL and p < 1.0 / (1 << k):
        k += 1
    return k


def _sample_seed(seed=None):
    """(seed, source): PATCHKIT_TIMER_SEED, else one drawn from the parent process's pid and
    start time, so that the ranks started by one server share it (and time the same cycle
    indices), while each run gets another; else from this process's pid and the time."""
    if seed is not None:
        return int(seed), "argument"
    raw = os.environ.get("PATCHKIT_TIMER_SEED", "").strip()
    if raw.isdigit():
        return int(raw), "env:PATCHKIT_TIMER_SEED"
    if raw:
        _warn("PATCHKIT_TIMER_SEED=%r is not a whole number >= 0; drawing one" % raw)
    try:
        ppid = os.getppid()
        with open("/proc/%d/stat" % ppid, encoding="ascii", errors="replace") as fh:
            started = int(fh.read().rsplit(")", 1)[1].split()[19])
        return (ppid * 1000003 + started) % (1 << 32), "parent"
    except Exception:
        return (os.getpid() * 1000003 + time.time_ns()) % (1 << 32), "pid+time"


def configure(
    mode=None,
    directory=None,
    graph_steps=None,
    batch=None,
    flush_s=None,
    ab=None,
    nvtx=None,
    event_api=None,
    share_ns=None,
    sample=None,
    seed=None,
    budget=None,
):
    """(Re)start timing in this process; returns the mode in effect.

    Arguments left as None come from the environment (ab: PATCHKIT_TIMER_AB, nvtx:
    PATCHKIT_TIMER_NVTX, share_ns: PATCHKIT_TIMER_SHARE_NS, sample: PATCHKIT_TIMER_SAMPLE,
    seed: PATCHKIT_TIMER_SEED, budget: PATCHKIT_TIMER_BUDGET; all of them in patchkit's
    docs/runtime.md, "Settings"). A sample (argument or environment) fixes the rate; without
    one the budget (a percent) sets it. event_api "torch.Event" or "torch.cuda.Event" picks
    the event class in events mode (default: torch.Event where torch has it). Pending records
    of the previous configuration are written first. Mainly for benches and tests:
    instrumented code needs nothing but the environment.
    """
    global _timer, _failed
    shutdown()
    requested = mode if mode is not None else _requested_mode()
    _check_arguments(requested, event_api, sample, budget)
    if requested == "off":
        _timer = None
        _bind("off")
        return "off"
    try:
        effective = _choose_mode(requested)
        _timer = _new_timer(
            effective,
            requested,
            directory=directory,
            graph_steps=graph_steps,
            batch=batch,
            flush_s=flush_s,
            ab=ab,
            nvtx=nvtx,
            event_api=event_api,
            share_ns=share_ns,
            sample=sample,
            seed=seed,
            budget=budget,
        )
        _failed = False
        _bind("on", _timer)
        _at_process_exit()
        return effective
    except Exception as exc:
        _fail("configure()", exc)
        return "off"


def _check_arguments(requested, event_api, sample, budget):
    """configure's ValueError for an argument out of its range (the environment's are warned
    about where they are read, never raised)."""
    if requested is not None and requested not in MODES:
        raise ValueError("mode must be one of %s, not %r" % (MODES, requested))
    if event_api is not None and event_api not in EVENT_APIS:
        raise ValueError("event_api must be one of %s, not %r" % (EVENT_APIS, event_api))
    if sample is not None and (type(sample) is not int or sample < 1):
        raise ValueError("sample must be a whole number >= 1, not %r" % (sample,))
    if budget is not None and (type(budget) not in (int, float) or not 0.0 <= budget < float("inf")):
        raise ValueError("budget must be a percent >= 0, not %r" % (budget,))


def _new_timer(
    effective,
    requested,
    directory,
    graph_steps,
    batch,
    flush_s,
    ab,
    nvtx,
    event_api,
    share_ns,
    sample,
    seed,
    budget,
):
    """configure's timer of mode `effective`: the arguments left as None read from the
    environment."""
    if directory is None:
        directory = os.environ.get("PATCHKIT_TIMER_DIR") or "patchkit-timing"
    if graph_steps is None:
        graph_steps = os.environ.get("PATCHKIT_TIMER_GRAPH_STEPS", "").lower() in _TRUE
    if flush_s is None:
        try:
            flush_s = float(os.environ.get("PATCHKIT_TIMER_FLUSH_S", "5"))
        except ValueError:
            flush_s = 5.0
    if ab is None:
        ab = _env_int("PATCHKIT_TIMER_AB", 0, minimum=0)
    if nvtx is None:
        nvtx = os.environ.get("PATCHKIT_TIMER_NVTX", "").strip().lower() in _TRUE
    if share_ns is None:
        share_ns = _env_int("PATCHKIT_TIMER_SHARE_NS", 1000, minimum=0)
    if sample is None:
        sample = _sample_every()
    if sample is None:  # no fixed rate: the budget sets it
        budget = float(_budget_pct() if budget is None else budget)
        sample = 1
    else:
        budget = None
    return _TIMERS[effective](
        requested,
        os.path.abspath(directory),
        graph_steps,
        batch or _env_int("PATCHKIT_TIMER_BATCH", 512),
        flush_s,
        ab=ab,
        nvtx=nvtx,
        event_api=event_api,
        share_ns=share_ns,
        sample=int(sample),
        seed=_sample_seed(seed) if int(sample) > 1 or budget is not None else None,
        ab_b=os.environ.get("PATCHKIT_TIMER_AB_B", "off").strip().lower(),
        budget=budget,
    )


def _at_process_exit():
    """A multiprocessing child (SGLang's scheduler is one) ends with os._exit() after its
    function returns or raises: atexit hooks do not run there, multiprocessing's own
    finalizers do. Register shutdown with them too (the second call is a no-op)."""
    mp_util = sys.modules.get("multiprocessing.util")
    process = sys.modules.get("multiprocessing.process")
    try:
        if mp_util is not None and process is not None and process.current_process().name != "MainProcess":
            mp_util.Finalize(None, shutdown, exitpriority=100)
    except Exception:
        pass


def current_mode():
    """The mode in effect ('off' before the first call has chosen one, or after a failure)."""
    return _timer.mode if _timer is not None else "off"


def output_path():
    """This process's JSON-lines file, once something has been written."""
    return _timer.writer.path if _timer is not None else None


def flush():
    """Write what has been resolved so far (never waits for the GPU)."""
    if _timer is not None:
        try:
            if _timer.resolver is not None:
                _timer.resolver.resolve()
            _timer.flush()
        except Exception as exc:
            _fail("flush()", exc)


def shutdown():
    """Collect the last device times (one wait), write everything with the stats line."""
    global _timer
    timer = _timer
    if timer is None or timer.pid != os.getpid():
        return
    try:
        if timer.pending_work():
            timer.flush(final=True)
    except Exception as exc:
        _fail("writing at exit", exc)
    _timer = None
    _bind("off")


def _activate():
    global _timer
    if _timer is None and not _failed:
        configure()


def _lazy_begin(name, **attrs):
    _activate()
    return begin(name, **attrs)


def _lazy_end(name):
    _activate()
    return end(name)


def _lazy_cycle_begin(**attrs):
    _activate()
    return cycle_begin(**attrs)


def _lazy_cycle_end(**attrs):
    _activate()
    return cycle_end(**attrs)


def _lazy_note(**attrs):
    _activate()
    return note(**attrs)


def _after_fork_call(attrs):
    """cycle_begin in a forked child where os.register_at_fork is missing: the child's own
    start, then the module's cycle_begin as it is bound now."""
    _after_fork_in_child()
    return cycle_begin(**attrs)


def _after_fork_in_child():
    """A forked child starts its own file; it never writes the parent's buffered records."""
    global _timer
    _timer = None
    if not _failed:
        _bind("off" if _requested_mode() == "off" else "lazy")


_ROWS = _api_table()  # the states without a timer: "off", "lazy"
if TYPE_CHECKING:  # (the module functions for the type checkers: at run time _bind binds them)
    begin = end = cycle_begin = cycle_end = note = _noop
_bind("off" if _requested_mode() == "off" else "lazy")
atexit.register(shutdown)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
