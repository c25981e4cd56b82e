# patchkit.tools.series: the action that does the work (the module file holds the documentation).
#
# It runs on the controller: patchkit compiles the series into one POSIX sh program, which goes
# to the host over the play's own connection (ssh, docker, kubectl, local, ...) on the standard
# input of `sh -s`, and the answer comes back on standard output. The host needs sh and the
# usual text tools (coreutils or BusyBox); no Python.

from __future__ import annotations

import enum
import os

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

ARGUMENT_SPEC = {
    "series": {"type": "str", "required": True},
    "root": {"type": "str", "required": True},
    "state": {"type": "str", "default": "verified", "choices": ["verified", "staged", "applied", "reverted"]},
    "layout": {"type": "str", "default": "auto", "choices": ["auto", "checkout", "installed"]},
    "force": {"type": "bool", "default": False},
}
STAGED_FACT = "patchkit_staged"  # {root: series digest} for hosts a `staged` task staged


def plain(value):
    """``value`` with only the types Ansible stores as they are (dict, list, str, int, float,
    bool, None): patchkit's states are StrEnums, which a registered result would carry, and
    Ansible warns "Type 'HostState' is unsupported in variable storage" when a play reads them."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [plain(v) for v in value]
    if isinstance(value, enum.Enum):
        return plain(value.value)
    for kind in (bool, int, float, str):  # exact types, also for subclasses
        if isinstance(value, kind):
            return kind(value)
    return None if value is None else str(value)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        _, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        try:
            import patchkit  # noqa: F401
        except ImportError as e:
            raise AnsibleActionFail(
                "patchkit.tools.series needs patchkit on the controller "
                "(pip install 'patchkit[ansible]' into the Python that runs "
                f"Ansible): {e}"
            ) from e
        from patchkit.errors import PatchkitError

        try:
            result.update(plain(self._work(args, task_vars or {})))
        except PatchkitError as e:
            result.update(failed=True, changed=False, msg=f"patchkit: {e.message}", exit_code=e.exit_code)
        return result

    # -- the operation ------------------------------------------------------------------------------

    def _work(self, args: dict, task_vars: dict) -> dict:
        from patchkit.engine.compilecache import compiled_series
        from patchkit.ops import FileReport, Options, run_on
        from patchkit.transport.remote import check_root

        host = task_vars.get("inventory_hostname", "host")
        root = check_root(args["root"], f"root of {host}")
        transport = _ConnectionTransport(label=f"{host}:{root}", root=root, action=self)
        series_dir, chose = self._series_dir(args["series"], transport, task_vars)
        state, check = args["state"], bool(self._task.check_mode)
        opts = Options(layout=args["layout"], force=args["force"])
        full = state in ("verified", "staged", "applied")
        compiled = compiled_series(series_dir, full=full)
        digest = compiled.series.digest
        staged = (task_vars.get(STAGED_FACT) or {}).get(root) == digest
        facts = None
        if state == "verified" or (check and state in ("staged", "applied")):
            h = run_on(compiled, transport, "verify", opts)
            changed = state != "verified" and h.ok and h.state != "applied"
        elif state == "reverted" and check:
            h = run_on(compiled, transport, "status", opts)
            changed = h.state in ("applied", "partial", "modified") or any(
                "saved state" in m for m in h.messages
            )
            if h.state in ("modified", "drifted") and not args["force"]:
                h.exit_code = max(h.exit_code, 1)
                h.messages.append(f"revert would be refused: the target is {h.state}")
        elif state == "staged":
            h = run_on(compiled, transport, "apply", opts, phase="stage")
            changed = h.ok and h.state == "staged"
            if changed:
                facts = {STAGED_FACT: dict(task_vars.get(STAGED_FACT) or {}, **{root: digest})}
        elif state == "applied":
            # after `staged`: commit only (nothing left to check that could fail on one host)
            h = run_on(compiled, transport, "commit" if staged else "apply", opts)
            changed = h.ok and bool(h.written)
            if staged:
                facts = {
                    STAGED_FACT: {k: v for k, v in (task_vars.get(STAGED_FACT) or {}).items() if k != root}
                }
        else:
            h = run_on(compiled, transport, "revert", opts)
            changed = h.ok and not any(m.startswith("nothing to revert") for m in h.messages)
            if staged:
                facts = {
                    STAGED_FACT: {k: v for k, v in (task_vars.get(STAGED_FACT) or {}).items() if k != root}
                }
        if h.ok and not h.files:  # staged, already applied: every file in the host's state
            from patchkit.paths import strip_prefix

            prefix = compiled.series.pin.package_prefix if h.layout == "installed" else None
            h.files = [FileReport(strip_prefix(p.path, prefix), h.state) for p in compiled.plans]
        out = {
            "changed": changed,
            "failed": not h.ok,
            "state": h.state,
            "exit_code": h.exit_code,
            "series": compiled.series.name,
            "series_dir": series_dir,
            "digest": digest,
            "layout": h.layout,
            "root": root,
            "files": [{"path": f.path, "state": f.state, "detail": f.detail} for f in h.files],
            "written": h.written,
            "messages": h.messages,
        }
        if h.journal:
            out["journal"] = h.journal
        if chose:
            out["messages"] = [chose] + out["messages"]
        if facts is not None:
            out["ansible_facts"] = facts
        verb = {"verified": "verified", "staged": "staged", "applied": "applied", "reverted": "reverted"}[
            state
        ]
        if not h.ok:
            out["msg"] = f"{h.state}: " + ("; ".join(h.messages) or "refused")
        elif check:
            out["msg"] = f"would be {verb}" if changed else f"nothing to do ({h.state})"
        else:
            out["msg"] = (
                f"{verb} ({len(h.written)} files written)" if changed else f"nothing to do ({h.state})"
            )
        if changed and self._task.diff and state in ("staged", "applied", "reverted"):
            from patchkit.engine.unified import series_unified_diff

            prefix = compiled.series.pin.package_prefix
            # revert reads the paths from the target's manifest and detects no layout: its paths say
            installed = (
                h.layout == "installed"
                if h.layout
                else bool(prefix) and any(not f.path.startswith(prefix) for f in h.files)
            )
            out["diff"] = {
                "prepared": series_unified_diff(series_dir, installed=installed, reverse=state == "reverted")
            }
        return out

    def _series_dir(self, series: str, transport, task_vars) -> tuple[str, str]:
        """A folder (absolute, or relative to the playbook), a shipped series name, or auto."""
        from patchkit.engine import autoseries
        from patchkit.errors import InvalidInput

        if series == "auto":
            cands = autoseries.candidates()
            seen = autoseries.read_target(transport, cands)
            chosen = autoseries.choose(seen, cands)
            return (
                str(chosen.directory),
                f"series auto: chose {chosen.directory.name} ({autoseries.release(chosen.pin)})",
            )
        expanded = os.path.expanduser(series)
        places = (
            [expanded]
            if os.path.isabs(expanded)
            else [os.path.join(self._loader.get_basedir(), expanded), os.path.abspath(expanded)]
        )
        for place in places:
            if os.path.isfile(os.path.join(place, "pin.toml")):
                return os.path.abspath(place), ""
        if "/" not in series:
            for cand in autoseries.candidates():
                if cand.directory.name == series:
                    return str(cand.directory), ""
        raise InvalidInput(
            f"series {series!r}: not a series folder (pin.toml, series, patches) "
            "nor the name of a shipped series; or give 'auto'"
        )


def _ConnectionTransport(label: str, root: str, action: ActionBase):
    """patchkit's transport over the play's connection: `sh -s` with the program on stdin
    (become applies as to any command), the answer read back byte for byte."""
    import time

    from patchkit.transport import RunResult, Transport

    class ConnectionTransport(Transport):
        def run(self, script: bytes, timeout: float | None = None) -> RunResult:
            start = time.monotonic()
            res = action._low_level_execute_command(
                "sh -s", in_data=script, sudoable=True, encoding_errors="surrogateescape"
            )
            out = (res.get("stdout") or "").encode("utf-8", "surrogateescape")
            err = (res.get("stderr") or "").encode("utf-8", "surrogateescape")
            return RunResult(res.get("rc", 1), out, err, time.monotonic() - start)

    return ConnectionTransport(label=label, root=root)
