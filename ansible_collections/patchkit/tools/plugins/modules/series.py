#!/usr/bin/python
# patchkit.tools.series: documentation. The work is done on the controller by the action plugin
# of the same name (plugins/action/series.py); this file never runs on a host.

from __future__ import annotations

DOCUMENTATION = r"""
module: series
short_description: Apply, verify or revert a pinned patchkit series, all files or none
description:
  - Checks that the host holds exactly the upstream text a patchkit series is pinned to (sha256,
    line count, every hunk's lines at their numbers), applies the series as line-addressed sed
    edits with the originals kept, and reverts byte for byte.
  - Runs on the controller. patchkit compiles the series into one POSIX sh program, sent over the
    play's own connection (ssh, docker, kubectl, local, ...) to C(sh -s) on the host, so the host
    needs only sh and the usual text tools (coreutils or BusyBox), no Python. Become applies.
  - The controller needs patchkit in the Python that runs Ansible (C(pip install 'patchkit[ansible]')).
  - "Across hosts, all-or-nothing is two tasks under C(any_errors_fatal: true): C(state: staged) on
    every host, then C(state: applied). Staging does every check and writes the edited files only
    under ROOT/.patchkit/; a host that cannot stage fails the play before any host's files change.
    C(applied) after C(staged) on the same host only commits (renames) what was staged."
version_added: "0.1.0"
author: patchkit
options:
  series:
    description:
      - A series folder (pin.toml, series, patches; a relative path is looked up beside the playbook,
        then in the current directory), the name of a series patchkit ships (C(sglang-v0.5.9)), or
        C(auto) for the shipped series pinned to exactly the host's files.
    type: str
    required: true
  root:
    description: The tree to patch on the host (an installed site-packages or a checkout); absolute.
    type: str
    required: true
  state:
    description:
      - C(verified) checks everything and stages into a temporary folder on the host; writes
        nothing under I(root); never changed.
      - C(staged) checks and stages under I(root)/.patchkit/ (the files themselves are untouched).
      - C(applied) applies (or commits what C(staged) staged); a second run reports no change.
      - C(reverted) puts the saved originals back byte for byte and removes all patchkit state
        (also drops a stage that was never committed).
    type: str
    choices: [verified, staged, applied, reverted]
    default: verified
  layout:
    description: Where the pinned paths are. C(installed) drops the pin's package_prefix.
    type: str
    choices: [auto, checkout, installed]
    default: auto
  force:
    description: With C(reverted), discard files modified after apply (kept in .patchkit/trash).
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: Nothing is written; the result says whether the state would change.
  diff_mode:
    support: full
    description: The unified diff of the series (reversed for C(reverted)), paths as on the host.
notes:
  - Exit codes of patchkit become C(exit_code) in the result; any non-zero code fails the task.
"""

EXAMPLES = r"""
- name: Patch every GPU host, or none
  hosts: gpu
  gather_facts: false
  any_errors_fatal: true
  tasks:
    - name: Check and stage everywhere (files untouched)
      patchkit.tools.series:
        series: sglang-v0.5.9
        root: /opt/venv/lib/python3.12/site-packages
        state: staged
    - name: Commit everywhere
      patchkit.tools.series:
        series: sglang-v0.5.9
        root: /opt/venv/lib/python3.12/site-packages
        state: applied

- name: Take it out again
  patchkit.tools.series:
    series: auto
    root: /opt/venv/lib/python3.12/site-packages
    state: reverted
"""

RETURN = r"""
state:
  description: The host's state after the task (pristine, applied, partial, modified, drifted;
    staged; or what stopped it, e.g. locked).
  returned: always
  type: str
files:
  description: Each file of the series with its state (pristine, applied, modified, drifted;
    staged, bad-result, restored, removed) and a detail for problems.
  returned: always
  type: list
  elements: dict
written:
  description: Files written on the host by this task.
  returned: always
  type: list
  elements: str
series:
  description: The series' name (the folder's name); C(series_dir) is the folder, C(digest) its digest.
  returned: always
  type: str
exit_code:
  description: patchkit's exit code (0 done, 1 refused, 2 invalid input).
  returned: always
  type: int
messages:
  description: What patchkit said about the host (drift per hunk, locks, already applied, ...).
  returned: always
  type: list
  elements: str
journal:
  description: With C(reverted), the journal taken off the host.
  returned: when reverted
  type: list
  elements: dict
"""

if __name__ == "__main__":
    import json

    print(
        json.dumps(
            {
                "failed": True,
                "msg": "patchkit.tools.series runs as an action plugin on "
                "the controller; install the patchkit.tools collection",
            }
        )
    )
