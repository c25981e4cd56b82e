# A callback plugin for the tests only: every task result, one JSON object a line, appended to
# the file named by $PK_ANSIBLE_RECORD (ansible-core ships no machine-readable stdout callback).

from __future__ import annotations

import json
import os

from ansible.plugins.callback import CallbackBase

PLAIN = (dict, list, str, int, float, bool, type(None))


def unplain(value, where="result") -> list[str]:
    """Where ``value`` holds something other than the exact JSON types, with its type."""
    if type(value) is dict:
        return [p for k, v in value.items() for p in unplain(v, f"{where}.{k}")]
    if type(value) is list:
        return [p for i, v in enumerate(value) for p in unplain(v, f"{where}[{i}]")]
    return [] if type(value) in PLAIN else [f"{where}: {type(value).__name__}"]


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "record"
    CALLBACK_NEEDS_ENABLED = True

    def _record(self, result, status):
        data = getattr(result, "_result", None)
        if data is None:
            data = getattr(result, "result", {})
        line = {
            "task": result._task.get_name(),
            "host": result._host.get_name(),
            "status": status,
            "result": data,
            "unplain": unplain(data),
        }
        with open(os.environ["PK_ANSIBLE_RECORD"], "a") as fh:
            fh.write(json.dumps(line, default=str) + "\n")

    def v2_runner_on_ok(self, result):
        self._record(result, "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._record(result, "failed")

    def v2_runner_on_unreachable(self, result):
        self._record(result, "unreachable")

    def v2_runner_on_skipped(self, result):
        self._record(result, "skipped")
