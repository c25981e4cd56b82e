"""Diagnostics for the GPU harness only (bench/gpu/run_h200.sh, stage `diag`): where does the
timer's per-cycle cost go?  Put this folder first on PYTHONPATH of a patched SGLang server and
set PK_DIAG_DIR; in the process that imports the phase timer (SGLang's scheduler) it records,
per cycle end (one line each, written at once):

    index kind(T timed | U untimed | O off-block) wall_ns self_ns cpu_ns gc_ns gc0 gc1 gc2 {name: ns}

self_ns: host time spent inside the timer's own functions since the previous cycle end
(sys.monitoring PY_START/PY_RETURN on the timer module's code objects only, so the rest of
the program runs unmonitored; the callbacks' own cost is counted in self_ns too);
cpu_ns: the thread's CPU time over the same span (wall minus cpu = time spent waiting);
gc_ns / gcN: time in and number of garbage collections by generation (gc.callbacks).
PK_DIAG_SCOPE=top (default) monitors only the functions the instrumented code calls (begin, end,
cycle_begin, cycle_end, note and the variants they are rebound to), so that timed and off cycles
pay the same monitoring cost per call, and the dict splits self_ns by those functions;
PK_DIAG_SCOPE=all monitors every function of the module (the callbacks then cost more in timed
cycles, which call more of them) and the dict also holds the time of each function called
directly from those (">name").
Paired by A/B block with the timing file's cycle records, bench/gpu/diag_report.py says how
much of a timed cycle's extra period is the timer's own host time, garbage collection, or
neither.  Not part of patchkit: a measuring aid for the harness.  Python >= 3.12.
"""

import gc
import importlib.abc
import importlib.machinery
import json
import os
import sys
import time

_OUT = os.environ.get("PK_DIAG_DIR")
_TARGET_SUFFIX = "phase_timer"


def _chain_original():
    """Run the sitecustomize this one shadows, if the interpreter has one."""
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        try:
            code = spec.loader.get_code("sitecustomize")
            exec(code, {"__name__": "_sitecustomize_chained", "__file__": spec.origin})
        except Exception as exc:  # never break the interpreter's start
            sys.stderr.write("patchkit diag: chained sitecustomize failed: %r\n" % (exc,))


# the runtime's methods named as before its split into parts (runtime-split): the tables
# below and the diag lines key the timer's functions by these names
_RENAMED = {
    "_Untimed.cycle_end": "_untimed_end",
    "_OffBlocks.cycle_begin": "off_cycle_begin",
    "_OffBlocks.cycle_end": "off_cycle_end",
    "_BareBlocks.cycle_begin": "_bare_cycle_begin",
    "_Profiler.begin": "_profiled_begin",
    "_Profiler.end": "_profiled_end",
}


def _name(code):
    return _RENAMED.get(getattr(code, "co_qualname", ""), code.co_name)


class _Monitor:
    ENDS = {  # noqa: RUF012 - read-only tables
        "cycle_end": "T",
        "_untimed_end": "U",
        "off_cycle_end": "O",
    }
    TOP = {  # noqa: RUF012
        "begin",
        "end",
        "cycle_begin",
        "cycle_end",
        "note",
        "_event_begin",
        "_event_end",
        "_host_begin",
        "_host_end",
        "_untimed_end",
        "off_cycle_begin",
        "off_cycle_end",
        "_noop",
        "_profiled_begin",
        "_profiled_end",
        "_lazy_begin",
        "_lazy_end",
        "_lazy_cycle_begin",
        "_lazy_cycle_end",
        "_lazy_note",
        "update",
    }

    def __init__(self, module):
        self.mod = module
        self.depth = 0
        self.t_enter = 0
        self.self_ns = 0
        self.gc_ns = 0
        self.gc_t0 = 0
        self.gcn = [0, 0, 0]
        self.by = {}
        self.stack = []
        self.scope = os.environ.get("PK_DIAG_SCOPE", "top")
        self.last_cpu = time.thread_time_ns()
        os.makedirs(_OUT, exist_ok=True)
        self.fd = os.open(
            os.path.join(_OUT, "diag.pid%d.txt" % os.getpid()), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644
        )
        os.write(self.fd, b"# index kind wall_ns self_ns cpu_ns gc_ns gc0 gc1 gc2 by\n")

    def gc_cb(self, phase, info):
        if phase == "start":
            self.gc_t0 = time.perf_counter_ns()
        else:
            self.gc_ns += time.perf_counter_ns() - self.gc_t0
            g = info.get("generation", 0)
            if 0 <= g <= 2:
                self.gcn[g] += 1

    def start(self, code, offset):
        if self.depth < 2:
            self.stack.append(time.perf_counter_ns())
        self.depth += 1

    def leave(self, code, offset, value):
        self.depth -= 1
        if self.depth > 1:
            return
        if self.depth < 0:
            self.depth = 0
            return
        now = time.perf_counter_ns()
        t = self.stack.pop() if self.stack else now
        name = _name(code)
        key = name if self.depth == 0 else ">" + name
        self.by[key] = self.by.get(key, 0) + now - t
        if self.depth == 1:
            return
        self.self_ns += now - t
        kind = self.ENDS.get(name)
        if kind is None:
            return
        timer = getattr(self.mod, "_timer", None)
        index = -1 if timer is None else timer.cycle_no
        cpu = time.thread_time_ns()
        line = "%d %s %d %d %d %d %d %d %d %s\n" % (
            index,
            kind,
            now,
            self.self_ns,
            cpu - self.last_cpu,
            self.gc_ns,
            *self.gcn,
            json.dumps(self.by, separators=(",", ":")),
        )
        self.last_cpu = cpu
        self.by = {}
        self.self_ns = self.gc_ns = 0
        self.gcn = [0, 0, 0]
        os.write(self.fd, line.encode())

    def install(self):
        mon = sys.monitoring
        tool = mon.PROFILER_ID
        mon.use_tool_id(tool, "patchkit-diag")
        ev = mon.events
        mon.register_callback(tool, ev.PY_START, self.start)
        mon.register_callback(tool, ev.PY_RETURN, self.leave)
        codes = _code_objects(self.mod)
        if self.scope != "all":
            codes = [c for c in codes if _name(c) in self.TOP]
        mine = {id(c) for c in codes}
        leave = self.leave

        def unwind(code, offset, exc):  # a global event (3.12): filtered to the timer's code
            if id(code) in mine:
                leave(code, offset, None)

        mon.register_callback(tool, ev.PY_UNWIND, unwind)
        mon.set_events(tool, ev.PY_UNWIND)
        n = 0
        for code in codes:
            mon.set_local_events(tool, code, ev.PY_START | ev.PY_RETURN)
            n += 1
        gc.callbacks.append(self.gc_cb)
        sys.stderr.write(
            "patchkit diag: monitoring %d code objects of %s (%s)\n" % (n, self.mod.__name__, self.scope)
        )


def _code_objects(module):
    seen, out, todo = set(), [], []
    for value in vars(module).values():
        if isinstance(value, type) and value.__module__ == module.__name__:
            todo += [getattr(v, "__code__", None) for v in vars(value).values()]
        else:
            todo.append(getattr(value, "__code__", None))
    while todo:
        code = todo.pop()
        if code is None or id(code) in seen or getattr(code, "co_filename", None) != module.__file__:
            continue
        seen.add(id(code))
        out.append(code)
        todo += [c for c in code.co_consts if hasattr(c, "co_consts")]
    return out


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if not name.endswith(_TARGET_SUFFIX) or "speculative" not in name:
            return None
        for finder in sys.meta_path:
            if finder is self:
                continue
            spec = finder.find_spec(name, path, target) if hasattr(finder, "find_spec") else None
            if spec is not None:
                break
        else:
            return None
        inner = spec.loader.exec_module

        def exec_module(module):
            inner(module)
            try:
                _Monitor(module).install()
            except Exception as exc:
                sys.stderr.write("patchkit diag: not installed: %r\n" % (exc,))

        spec.loader.exec_module = exec_module
        return spec


_chain_original()
if _OUT and hasattr(sys, "monitoring"):
    sys.meta_path.insert(0, _Finder())
