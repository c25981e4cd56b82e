"""What the runtime's module functions are bound to, and who binds them.

The instrumented code calls ``_pt.begin``, ``_pt.end``, ``_pt.cycle_begin``, ``_pt.cycle_end`` and
``_pt.note``; the runtime rebinds those five names when its state changes (timing off, not yet
configured, on, inside a timed or an untimed cycle, inside an A/B off block), so that each call is
the function that handles it and nothing else (the no-op itself when timing is off). One function
binds them, ``_bind``, from one table (``_api_table``); the first test holds the source to that,
the others walk every public switch in a fresh interpreter and check what is bound after each.
"""

import ast
import json

from patchkit.timing import runtime_source
from support.timing_scripts import (
    fake_torch,  # noqa: F401  (a pytest fixture)
    run_script,
    with_fake_torch,
)

API = ("begin", "end", "cycle_begin", "cycle_end", "note")
BINDER = "_bind"


def _functions(tree):
    """{node: the name of the function (or method: Class.name) it lies in, or '<module>'}."""
    owner = {}

    def walk(node, where):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                inner = child.name if where == "<module>" else where + "." + child.name
            else:
                inner = where
            owner[child] = where if inner == where else inner
            walk(child, inner)

    walk(tree, "<module>")
    return owner


def _type_checking_only(node, tree):
    """True for a statement inside a module-level ``if TYPE_CHECKING:`` (never run)."""
    return any(
        isinstance(stmt, ast.If)
        and isinstance(stmt.test, ast.Name)
        and stmt.test.id == "TYPE_CHECKING"
        and any(node is sub for sub in ast.walk(stmt))
        for stmt in tree.body
    )


def binding_sites(source):
    """[(function, line, what)] of every place in ``source`` that can bind a module function:
    a call of globals() or vars() (its dict written or handed on), a ``global`` statement naming
    one of API, setattr() on a module, and a module-level statement that binds one of API at
    run time (an assignment, def, import or for target; not one under ``if TYPE_CHECKING:``)."""
    tree = ast.parse(source)
    owner = _functions(tree)
    sites = []
    for node in ast.walk(tree):
        where = owner.get(node, "<module>")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in ("globals", "vars") or (node.func.id == "setattr" and node.args):
                sites.append((where, node.lineno, node.func.id + "()"))
        elif isinstance(node, ast.Global) and set(node.names) & set(API):
            sites.append((where, node.lineno, "global " + ", ".join(node.names)))
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id in API:
            if where == "<module>" and not _type_checking_only(node, tree):
                sites.append((where, node.lineno, node.id + " ="))
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in API and where == "<module>":
            sites.append((where, node.lineno, "def " + node.name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and where == "<module>":
            bound = {(a.asname or a.name).split(".")[0] for a in node.names}
            if bound & set(API):
                sites.append((where, node.lineno, "import"))
    return sorted(sites)


def test_one_function_binds_the_module_functions():
    """Every place that can rebind the module functions is inside _bind, and _bind binds them
    from the table: the switches (configure, shutdown, a failure, a fork, a cycle's begin and
    end, an A/B block's boundary) call it, none writes the module's globals itself. (Before,
    16 statements in 10 functions of 3 classes and the module wrote them, and one module-level
    assignment defined them.)"""
    source = runtime_source()
    sites = binding_sites(source)
    assert sites, "the check finds _bind's own binding"
    assert {where for where, _, _ in sites} == {BINDER}, sites
    assert [what for _, _, what in sites] == ["globals()"]  # one globals() call, in _bind
    tree = ast.parse(source)
    (binder,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == BINDER]
    # all five names at once, from the state's row of the table: _ROWS (the states without a
    # timer) or the timer's own (timer.api)
    whole = next(
        n for n in ast.walk(binder) if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Tuple)
    )
    names = [ast.literal_eval(t.slice) for t in whole.targets[0].elts]
    assert names == list(API)
    assert ast.unparse(whole.value) == "_ROWS[state] if timer is None else timer.api[state]"
    switches = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == BINDER
    ]
    states = {c.value for call in switches for c in ast.walk(call.args[0]) if isinstance(c, ast.Constant)}
    assert states == {"off", "lazy", "on", "timed", "untimed", "off_block"}


def test_the_check_finds_what_the_old_runtime_did():
    """The check is not vacuous: each way the runtime once rebound the functions is a site."""
    old = """
begin = end = cycle_begin = cycle_end = note = _noop
class _Untimed:
    def begin(self, t0, attrs):
        g = globals()
        g["begin"] = g["end"] = _noop
def _bind(target):
    g = globals()
    for name in _API:
        g[name] = getattr(target, name)
def _bind_lazy():
    global begin
    begin = _lazy_begin
"""
    sites = binding_sites(old)
    assert [(w, what) for w, _, what in sites] == [
        ("<module>", "begin ="),
        ("<module>", "cycle_begin ="),
        ("<module>", "cycle_end ="),
        ("<module>", "end ="),
        ("<module>", "note ="),
        ("_Untimed.begin", "globals()"),
        ("_bind", "globals()"),
        ("_bind_lazy", "global begin"),
    ]


# -- what is bound after every switch ----------------------------------------------------------

# prints, after each step, what each of the five module functions is: "noop" (the module's no-op),
# a lazy function, or "<part>.<method>" with part the object whose method it is
WHO = """
import json, os, sys
import phase_timer as _pt

def who(fn):
    if fn is _pt._noop:
        return "noop"
    owner = getattr(fn, "__self__", None)
    timer = _pt._timer
    if owner is None:
        return fn.__qualname__
    if isinstance(owner, dict):
        return "attrs.update" if fn.__name__ == "update" else repr(fn)
    for part in ("untimed", "blocks", "profiler", "sampler"):
        if timer is not None and owner is getattr(timer, part, None):
            return part + "." + fn.__name__
    if owner is timer:
        return "timer." + fn.__name__
    return "stale " + type(owner).__name__ + "." + fn.__name__

STEPS = []

def step(label):
    STEPS.append([label, " ".join(who(getattr(_pt, name)) for name in %r)])

""" % (API,)

END = """
print("STEPS", json.dumps(STEPS))
"""

OFF = "noop noop noop noop noop"
LAZY = "_lazy_begin _lazy_end _lazy_cycle_begin _lazy_cycle_end _lazy_note"
ON = "timer.begin timer.end timer.cycle_begin timer.cycle_end timer.note"
HOST_TIMED = "timer._host_begin timer._host_end timer.cycle_begin timer.cycle_end timer.note"
EVENT_TIMED = "timer._event_begin timer._event_end timer.cycle_begin timer.cycle_end timer.note"
UNTIMED = "noop noop timer.cycle_begin untimed.cycle_end attrs.update"
OFF_BLOCK = "noop noop blocks.cycle_begin blocks.cycle_end noop"
BARE_BLOCK = "noop noop blocks.cycle_begin noop noop"  # a bare block's cycle_end is the no-op itself
CALIBRATING = (
    "_Sampler.calibrate_open.<locals>.begin _Sampler.calibrate_open.<locals>.end"
    " timer.cycle_begin timer.cycle_end _Sampler.calibrate_open.<locals>.note"
)
PROFILED = "profiler.begin profiler.end timer.cycle_begin timer.cycle_end timer.note"
PROFILED_UNTIMED = "profiler.begin profiler.end timer.cycle_begin untimed.cycle_end attrs.update"


def steps(res):
    assert res.returncode == 0, res.stderr
    return [tuple(s) for s in json.loads(res.stdout.split("STEPS", 1)[1])]


def test_every_switch_of_the_host_runtime_binds_the_expected_functions(runtime_dir, tmp_path):
    body = (
        WHO
        + """
step("import")
_pt.begin("warmup"); step("first call (configured)"); _pt.end("warmup")
_pt.cycle_begin(kind="decode"); step("timed cycle")
_pt.begin("a"); _pt.end("a"); _pt.note(accepted=1)
_pt.cycle_end(); step("timed cycle ended")
_pt.configure(mode="off"); step("configure off")
_pt.configure(mode="host", sample=1000000, seed=1); step("configure sampled")
_pt.cycle_begin(kind="decode"); step("untimed cycle")
_pt.cycle_begin(kind="decode"); step("untimed cycle begun again")
_pt.cycle_end(); step("untimed cycle ended")
_pt.configure(mode="host", ab=2, sample=1); step("configure A/B")
for i in range(5):
    _pt.cycle_begin(kind="decode"); step("A/B cycle %d" % i); _pt.cycle_end()
_pt.configure(mode="host", budget=1.0, seed=1)
for i in range(9):
    _pt.cycle_begin(kind="decode")
    if i in (0, 8):
        step("budget cycle %d" % i)
    _pt.begin("a"); _pt.end("a"); _pt.note(accepted=1)
    _pt.cycle_end()
step("budget cycles ended")
_pt.cycle_begin(kind="decode"); _pt.shutdown(); step("shutdown in a cycle")
_pt.configure(mode="host", directory=os.devnull + "/nowhere", sample=1)
_pt.cycle_begin(kind="decode"); _pt.cycle_end()
step("failed: %s" % _pt.current_mode())
_pt.cycle_begin(kind="decode"); step("after a failure")
_pt.configure(mode="host", sample=1); _pt.cycle_begin(kind="decode")
sys.stdout.flush()
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    step("forked child")
    os.write(w, json.dumps(STEPS[-1]).encode())
    os._exit(0)
os.waitpid(pid, 0)
STEPS.append(json.loads(os.read(r, 65536)))
step("parent after the fork")
_pt.cycle_end(); step("parent's cycle ended")
"""
        + END
    )
    res = run_script(runtime_dir, body, out_dir=tmp_path / "out")
    assert steps(res) == [
        ("import", LAZY),
        ("first call (configured)", ON),
        ("timed cycle", HOST_TIMED),
        ("timed cycle ended", ON),
        ("configure off", OFF),
        ("configure sampled", ON),
        ("untimed cycle", UNTIMED),
        ("untimed cycle begun again", UNTIMED),  # the first abandoned, the second open
        ("untimed cycle ended", ON),
        ("configure A/B", ON),
        ("A/B cycle 0", HOST_TIMED),
        ("A/B cycle 1", HOST_TIMED),
        ("A/B cycle 2", OFF_BLOCK),
        ("A/B cycle 3", OFF_BLOCK),
        ("A/B cycle 4", HOST_TIMED),
        ("budget cycle 0", HOST_TIMED),
        ("budget cycle 8", CALIBRATING),  # the first calibration cycle: begin/end/note clocked
        ("budget cycles ended", ON),
        ("shutdown in a cycle", OFF),
        ("failed: off", OFF),
        ("after a failure", OFF),
        ("forked child", LAZY),
        ("parent after the fork", HOST_TIMED),
        ("parent's cycle ended", ON),
    ]


def test_off_at_import_binds_the_no_op_until_configured(runtime_dir, tmp_path):
    body = (
        WHO
        + """
step("import")
_pt.begin("a"); _pt.end("a"); _pt.cycle_begin(); step("calls while off")
_pt.configure(mode="host", sample=1); step("configure host")
_pt.cycle_begin(kind="decode"); step("timed cycle")
_pt.shutdown(); step("shutdown")
"""
        + END
    )
    res = run_script(runtime_dir, body, env={"PATCHKIT_TIMER": "off"}, out_dir=tmp_path / "out")
    assert steps(res) == [
        ("import", OFF),
        ("calls while off", OFF),
        ("configure host", ON),
        ("timed cycle", HOST_TIMED),
        ("shutdown", OFF),
    ]


# the profiler's stand-in: torch.autograd.profiler's flag and the two record_function ops
PROFILER = """
import types
prof_mod = types.ModuleType("torch.autograd.profiler")
prof_mod._is_profiler_enabled = False
sys.modules["torch.autograd.profiler"] = prof_mod
torch.ops = types.SimpleNamespace(profiler=types.SimpleNamespace(
    _record_function_enter_new=lambda name, args: name, _record_function_exit=lambda handle: None))
"""


def test_every_switch_with_torch_binds_the_expected_functions(runtime_dir, fake_torch, tmp_path):  # noqa: F811
    body = (
        with_fake_torch(
            fake_torch,
            PROFILER
            + WHO
            + """
for mode in ("events", "sync", "host"):
    _pt.configure(mode=mode, sample=1); step(mode)
    _pt.cycle_begin(kind="decode"); step(mode + " timed cycle")
    prof_mod._is_profiler_enabled = True
    _pt.cycle_begin(kind="decode"); step(mode + " timed cycle, profiler on")
    _pt.cycle_end(); step(mode + " profiled cycle ended")
    prof_mod._is_profiler_enabled = False
_pt.configure(mode="host", sample=1000000, seed=1)
prof_mod._is_profiler_enabled = True
_pt.cycle_begin(kind="decode"); step("untimed cycle, profiler on")
_pt.cycle_end(); step("untimed cycle ended")
prof_mod._is_profiler_enabled = False
_pt.configure(mode="events", nvtx=True, sample=1)
_pt.cycle_begin(kind="decode"); step("events+nvtx timed cycle")
_pt.cycle_end()
os.environ["PATCHKIT_TIMER_AB_B"] = "bare"
_pt.configure(mode="events", ab=1, sample=1)
_pt.cycle_begin(kind="decode"); _pt.cycle_end()
_pt.cycle_begin(kind="decode"); step("bare block")
_pt.cycle_end(); step("bare block's cycle ended")
_pt.cycle_begin(kind="decode"); step("back from the bare block")
_pt.shutdown(); step("shutdown")
""",
        )
        + END
    )
    res = run_script(runtime_dir, body, out_dir=tmp_path / "out", clock=True)
    assert steps(res) == [
        ("events", ON),
        ("events timed cycle", EVENT_TIMED),
        ("events timed cycle, profiler on", PROFILED),
        ("events profiled cycle ended", ON),
        ("sync", ON),
        ("sync timed cycle", ON),  # sync mode has no in-cycle pair: the general functions stay
        ("sync timed cycle, profiler on", PROFILED),
        ("sync profiled cycle ended", ON),
        ("host", ON),
        ("host timed cycle", HOST_TIMED),
        ("host timed cycle, profiler on", PROFILED),
        ("host profiled cycle ended", ON),
        ("untimed cycle, profiler on", PROFILED_UNTIMED),
        ("untimed cycle ended", ON),
        ("events+nvtx timed cycle", ON),  # NVTX: the general functions push and pop the ranges
        ("bare block", BARE_BLOCK),
        ("bare block's cycle ended", BARE_BLOCK),
        ("back from the bare block", EVENT_TIMED),
        ("shutdown", OFF),
    ]
