"""Ansible inventories (INI and YAML) as fleets of targets: `--inventory FILE --limit PATTERN`.

Read as Ansible reads them, for what a patch fleet needs:
  - groups, `[g:children]` / `children:`, `[g:vars]` / `vars:`, inline host variables, host
    ranges (`gpu[01:16]`, `db-[a:c]`, `[1:9:2]`), `host:port` in INI, the implicit `all` and
    `ungrouped` groups; variables merge as in Ansible: `all`, then groups from the shallowest to
    the deepest (same depth: by name), then the host's own;
  - connection variables: ansible_host, ansible_port, ansible_user (and their older ansible_ssh_*
    spellings), ansible_ssh_private_key_file, ansible_ssh_common_args / ansible_ssh_extra_args
    (-o, -J, -i, -p, -l, -4, -6, -C), ansible_connection (ssh, smart, paramiko or local);
  - `patchkit_root`: the target directory on that host (`--root` replaces it for every host).
  - a target kind's own variable (TargetKind.inventory_var), e.g. `patchkit_k8s:
    NAMESPACE/SELECTOR`: the host stands for the targets that kind makes of it (k8s: every running
    pod that label selector matches, each a target at patchkit_root); `patchkit_<setting>` for
    each of the kind's settings (`patchkit_k8s_container`, `patchkit_kube_context`) beats the
    option for that host; its connection variables are not used.
The file kind follows Ansible: .yml/.yaml/.json is YAML (PyYAML: `pip install patchkit[inventory]`),
anything else INI. group_vars/ and host_vars/ beside the inventory are read as Ansible does
(YAML files or directories of them; they beat the inventory's own variables). Templated values
(`{{ … }}`) are refused. Every problem is an InvalidInput (exit 2) that starts with FILE:LINE.

Patterns (--limit), as Ansible's: names of hosts or groups, `all` or `*`, shell wildcards
(`gpu*`), `~regex`, joined by `:` or `,` (union); a term prefixed `&` intersects, `!` excludes.
A term that matches nothing is an error, so a typo never silently shrinks a fleet.
"""

from __future__ import annotations

import ast
import fnmatch
import os
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field

from patchkit.errors import InvalidInput
from patchkit.transport import TargetKind, Transport, parse_target, target_kinds

_SECTION = re.compile(r"\[([^\[\]:\s]+)(?::([^\[\]\s]*))?\]\s*(?:[#;].*)?\Z")
_NAME = re.compile(r"[^\s\[\]:,&!~*?]+\Z")
_RANGE = re.compile(r"\[([0-9]+|[a-zA-Z]?):([0-9]+|[a-zA-Z]):?([0-9]*)\]")
_HOST_PORT = re.compile(r"([^:]*(?:\[[^\]]*\][^:]*)*):([0-9]+)\Z")
_YAML_SUFFIXES = (".yml", ".yaml", ".json")
_GROUP_KEYS = ("hosts", "vars", "children")


class InventoryError(InvalidInput):
    """FILE:LINE: message. `line` may be a (file, line) pair: a variable from group_vars/."""

    def __init__(self, path: str, line, message: str):
        if isinstance(line, tuple):
            path, line = line
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {message}")


@dataclass
class Group:
    name: str
    line: int
    hosts: list[str] = field(default_factory=list)
    children: list[str] = field(default_factory=list)
    vars: dict[str, tuple[object, int]] = field(default_factory=dict)


@dataclass
class Host:
    name: str
    line: int
    vars: dict[str, tuple[object, int]] = field(default_factory=dict)


@dataclass
class Inventory:
    path: str
    groups: dict[str, Group] = field(default_factory=dict)
    hosts: dict[str, Host] = field(default_factory=dict)
    edges: dict[tuple[str, str], int] = field(default_factory=dict, repr=False)  # -> line
    _members: dict[str, set[str]] | None = field(default=None, repr=False)

    # -- building ------------------------------------------------------------------------------

    def group(self, name: str, line: int) -> Group:
        if name not in self.groups:
            self.groups[name] = Group(name, line)
        return self.groups[name]

    def add_host(self, name: str, group: str, line: int, variables: dict) -> None:
        host = self.hosts.setdefault(name, Host(name, line))
        host.vars.update(variables)
        members = self.group(group, line).hosts
        if name not in members:
            members.append(name)

    def add_child(self, parent: str, child: str, line: int) -> None:
        if child == "all":
            raise InventoryError(
                self.path, line, f"group {parent!r}: 'all' contains every group and cannot be a child"
            )
        self.group(child, line)
        children = self.group(parent, line).children
        if child not in children:
            children.append(child)
            self.edges[(parent, child)] = line

    def finish(self) -> Inventory:
        """Add `all` / `ungrouped` as Ansible does, and refuse cycles."""
        top = self.group("all", 0)
        for name, group in self.groups.items():
            self._check_cycle(name, group, [])
        parents = {c for g in self.groups.values() for c in g.children}
        for name in self.groups:
            if name != "all" and name not in parents and name not in top.children:
                top.children.append(name)
        grouped = {h for name, g in self.groups.items() if name not in ("all", "ungrouped") for h in g.hosts}
        ungrouped = self.group("ungrouped", 0)
        for name in self.hosts:
            if name not in grouped and name not in ungrouped.hosts:
                ungrouped.hosts.append(name)
        if "ungrouped" not in top.children:
            top.children.append("ungrouped")
        return self

    def _check_cycle(self, name: str, group: Group, path: list[str]) -> None:
        if name in path:
            raise InventoryError(
                self.path,
                self.edges.get((path[-1], name), group.line),
                "group cycle: " + " -> ".join(path[path.index(name) :] + [name]),
            )
        for child in group.children:
            self._check_cycle(child, self.groups[child], path + [name])

    # -- reading -------------------------------------------------------------------------------

    def group_hosts(self, name: str) -> set[str]:
        group = self.groups[name]
        found = set(group.hosts)
        for child in group.children:
            found |= self.group_hosts(child)
        return found

    def host_groups(self, host: str) -> list[str]:
        """The host's groups with their ancestors, in Ansible's variable order."""
        depth: dict[str, int] = {}

        def walk(name: str, level: int) -> None:
            depth[name] = max(depth.get(name, -1), level)
            for child in self.groups[name].children:
                walk(child, level + 1)

        walk("all", 0)
        if self._members is None:
            self._members = {g: self.group_hosts(g) for g in self.groups}
        mine = [g for g in self.groups if host in self._members[g]]
        return sorted(mine, key=lambda g: (depth.get(g, 0), g))

    def host_vars(self, host: str) -> dict[str, tuple[object, int]]:
        merged: dict[str, tuple[object, int]] = {}
        for name in self.host_groups(host):
            merged.update(self.groups[name].vars)
        merged.update(self.hosts[host].vars)
        return merged

    def select(self, pattern: str | None) -> list[str]:
        """Host names matching an Ansible pattern, in inventory order."""
        pattern = (pattern or "all").strip() or "all"
        terms = [t.strip() for t in re.split("," if "," in pattern else ":", pattern) if t.strip()]
        union, narrow, exclude = set(), [], set()
        for term in terms:
            if term.startswith("&"):
                narrow.append(self._match(term[1:], pattern))
            elif term.startswith("!"):
                exclude |= self._match(term[1:], pattern)
            else:
                union |= self._match(term, pattern)
        if not any(not t.startswith(("&", "!")) for t in terms):
            union = set(self.hosts)  # "!gpu3" alone means all but gpu3
        for hosts in narrow:
            union &= hosts
        chosen = [h for h in self.hosts if h in union and h not in exclude]
        if not chosen:
            raise InvalidInput(f"{self.path}: --limit {pattern!r} leaves no host")
        return chosen

    def _match(self, term: str, pattern: str) -> set[str]:
        if term in ("all", "*"):
            return set(self.hosts)
        if term in self.groups:
            return self.group_hosts(term)
        if term in self.hosts:
            return {term}
        found: set[str] = set()
        if term.startswith("~"):
            try:
                rx = re.compile(term[1:])
            except re.error as e:
                raise InvalidInput(f"--limit {pattern!r}: bad regular expression {term!r}: {e}") from e
            test: Callable[[str], object] | None = rx.search
        elif any(ch in term for ch in "*?["):
            test = lambda name: fnmatch.fnmatchcase(name, term)  # noqa: E731
        else:
            test = None
        if test is not None:
            for name in self.groups:
                if test(name):
                    found |= self.group_hosts(name)
            found |= {h for h in self.hosts if test(h)}
        if not found:
            raise InvalidInput(
                f"{self.path}: --limit {pattern!r}: {term!r} is no host or group "
                f"of this inventory (groups: {', '.join(sorted(self.groups))})"
            )
        return found


# ---- loading ------------------------------------------------------------------------------------


def load_inventory(path: str) -> Inventory:
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as e:
        raise InvalidInput(f"{path}: cannot read the inventory: {e.strerror}") from e
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise InventoryError(path, line, "not UTF-8 text") from e
    inventory = _load_yaml(path, text) if path.lower().endswith(_YAML_SUFFIXES) else _load_ini(path, text)
    inventory.finish()
    if not inventory.hosts:
        raise InventoryError(path, None, "the inventory lists no hosts")
    _load_vars_dirs(inventory, os.path.dirname(os.path.abspath(path)))
    return inventory


def _load_vars_dirs(inv: Inventory, base: str) -> None:
    """group_vars/NAME and host_vars/NAME beside the inventory, as Ansible reads them: a YAML
    file (no suffix, .yml, .yaml or .json) or a directory of them (in name order); they beat
    the inventory file's own variables for that group or host."""
    for kind, names in (("group_vars", inv.groups), ("host_vars", inv.hosts)):
        folder = os.path.join(base, kind)
        if not os.path.isdir(folder):
            continue
        for name, owner in names.items():
            for file in _vars_files(folder, name):
                owner.vars.update(_yaml_vars(file))


def _vars_files(folder: str, name: str) -> list[str]:
    found = []
    for suffix in ("",) + _YAML_SUFFIXES:
        candidate = os.path.join(folder, name + suffix)
        if os.path.isfile(candidate):
            found.append(candidate)
        elif suffix == "" and os.path.isdir(candidate):
            found += [
                os.path.join(candidate, f)
                for f in sorted(os.listdir(candidate))
                if os.path.isfile(os.path.join(candidate, f)) and (f.endswith(_YAML_SUFFIXES) or "." not in f)
            ]
    return found


def _yaml_vars(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except (OSError, UnicodeDecodeError) as e:
        raise InventoryError(path, None, f"cannot read variables: {e}") from e
    root, loader = _compose(path, text)
    if root is None or _is_null(root):
        return {}
    return {
        var: (loader.construct_document(node), (path, _line(node)))
        for var, node in _mapping(path, root, "a variables file")
    }


def _literal(value: str):
    """INI values as Ansible reads them: a Python literal when it is one, else the text."""
    try:
        return ast.literal_eval(value)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return value


def _load_ini(path: str, text: str) -> Inventory:
    inv = Inventory(path)
    group, kind = "ungrouped", "hosts"
    defined, var_sections = {"all", "ungrouped"}, []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            m = _SECTION.match(line)
            if not m:
                raise InventoryError(path, number, f"bad section header {line!r}")
            group, kind = m.group(1), m.group(2) if m.group(2) is not None else "hosts"
            if kind not in ("hosts", "vars", "children"):
                raise InventoryError(
                    path,
                    number,
                    f"unknown section kind {kind!r} in {line!r} "
                    "(use [group], [group:vars] or [group:children])",
                )
            if kind == "vars":
                var_sections.append((group, number))
            else:
                defined.add(group)
            inv.group(group, number)
            continue
        if kind == "vars":
            key, eq, value = line.partition("=")
            if not eq or not key.strip():
                raise InventoryError(path, number, f"expected key=value in [{group}:vars], found {line!r}")
            inv.group(group, number).vars[key.strip()] = (_literal(value.strip()), number)
        elif kind == "children":
            words = line.split("#", 1)[0].split()
            if len(words) != 1 or not _NAME.match(words[0]):
                raise InventoryError(
                    path, number, f"expected one group name in [{group}:children], found {line!r}"
                )
            inv.add_child(group, words[0], number)
            defined.add(words[0])
        else:
            _ini_host_line(inv, path, number, line, group, seen_section=group != "ungrouped")
    for group, number in var_sections:
        if group not in defined:
            raise InventoryError(path, number, f"[{group}:vars] for a group that is never defined")
    return inv


def _ini_host_line(inv: Inventory, path: str, number: int, line: str, group: str, seen_section: bool) -> None:
    try:
        words = shlex.split(line, comments=True)
    except ValueError as e:
        raise InventoryError(path, number, f"cannot split {line!r}: {e}") from e
    if not words:
        return
    spec, variables = words[0], {}
    for word in words[1:]:
        key, eq, value = word.partition("=")
        if not eq or not key:
            raise InventoryError(path, number, f"expected key=value after the host name, found {word!r}")
        variables[key] = (_literal(value), number)
    if spec.endswith(":"):
        hint = "" if seen_section else " (is this a YAML inventory? name it .yml)"
        raise InventoryError(path, number, f"bad host {spec!r}{hint}")
    name, m = spec, _HOST_PORT.match(spec)
    if m:
        name = m.group(1)
        variables.setdefault("ansible_port", (int(m.group(2)), number))
    for host in expand_hosts(name, path, number):
        inv.add_host(host, group, number, variables)


def expand_hosts(pattern: str, path: str, line: int) -> list[str]:
    """`gpu[01:03]` -> gpu01 gpu02 gpu03; `db-[a:c]`; `[1:9:2]`; several ranges multiply."""
    m = _RANGE.search(pattern)
    if not m:
        if not _NAME.match(pattern):
            raise InventoryError(path, line, f"bad host name {pattern!r}")
        return [pattern]
    head, tail = pattern[: m.start()], pattern[m.end() :]
    begin, end, step = m.group(1) or "0", m.group(2), int(m.group(3) or 1)
    if begin.isdigit() != end.isdigit() or step < 1:
        raise InventoryError(path, line, f"bad host range {m.group(0)!r} in {pattern!r}")
    if begin.isdigit():
        width = len(begin) if begin.startswith("0") and len(begin) > 1 else 0
        if width and len(end) != width:
            raise InventoryError(path, line, f"host range {m.group(0)!r}: begin and end need the same width")
        values = [str(i).zfill(width) for i in range(int(begin), int(end) + 1, step)]
    else:
        values = [chr(i) for i in range(ord(begin), ord(end) + 1, step)]
    if not values:
        raise InventoryError(path, line, f"empty host range {m.group(0)!r} in {pattern!r}")
    return [h for v in values for h in expand_hosts(head + v + tail, path, line)]


def _compose(path: str, text: str):
    """(root node or None, a loader that turns nodes into values)."""
    try:
        import yaml
    except ImportError as e:
        raise InvalidInput(
            f"{path}: YAML inventories and group_vars/ need PyYAML: pip install 'patchkit[inventory]'"
        ) from e
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise InventoryError(
            path, mark.line + 1 if mark else None, f"not valid YAML: {getattr(e, 'problem', None) or e}"
        ) from e
    return root, yaml.SafeLoader("")


def _load_yaml(path: str, text: str) -> Inventory:
    root, loader = _compose(path, text)
    inv = Inventory(path)
    if root is None or _is_null(root):
        return inv
    value = lambda node: loader.construct_document(node)  # noqa: E731
    for key, node in _mapping(path, root, "the top level (group names)"):
        _yaml_group(inv, path, key, node, value)
    return inv


def _line(node) -> int:
    return node.start_mark.line + 1


def _is_null(node) -> bool:
    return node.tag == "tag:yaml.org,2002:null"


def _mapping(path: str, node, what: str):
    """(name, value node) pairs of a YAML mapping whose keys are plain names."""
    import yaml

    if not isinstance(node, yaml.MappingNode):
        kind = "a list" if isinstance(node, yaml.SequenceNode) else f"{node.value!r}"
        raise InventoryError(path, _line(node), f"{what} must be a mapping, found {kind}")
    for key, value in node.value:
        if not isinstance(key, yaml.ScalarNode) or not key.value:
            raise InventoryError(path, _line(key), f"{what}: keys must be names")
        yield key.value, value


def _yaml_group(inv: Inventory, path: str, name: str, node, value) -> None:
    if not _NAME.match(name):
        raise InventoryError(path, _line(node), f"bad group name {name!r}")
    inv.group(name, _line(node))
    if _is_null(node):
        return
    for key, child in _mapping(path, node, f"group {name!r}"):
        if key not in _GROUP_KEYS:
            raise InventoryError(
                path,
                _line(child) if not _is_null(child) else _line(node),
                f"group {name!r}: unknown key {key!r} (a group has {', '.join(_GROUP_KEYS)})",
            )
        if _is_null(child):
            continue
        if key == "hosts":
            for spec, host_node in _mapping(path, child, f"group {name!r} hosts"):
                variables = {}
                if not _is_null(host_node):
                    for var, var_node in _mapping(path, host_node, f"host {spec!r}"):
                        variables[var] = (value(var_node), _line(var_node))
                for host in expand_hosts(spec, path, _line(host_node)):
                    inv.add_host(host, name, _line(host_node), variables)
        elif key == "vars":
            for var, var_node in _mapping(path, child, f"group {name!r} vars"):
                inv.groups[name].vars[var] = (value(var_node), _line(var_node))
        else:
            for sub, sub_node in _mapping(path, child, f"group {name!r} children"):
                inv.add_child(name, sub, _line(sub_node))
                _yaml_group(inv, path, sub, sub_node, value)


# ---- hosts as targets ---------------------------------------------------------------------------

_ALIASES = {
    "ansible_ssh_host": "ansible_host",
    "ansible_ssh_port": "ansible_port",
    "ansible_ssh_user": "ansible_user",
}
_FLAG_OPTIONS = {"-J": "ProxyJump", "-i": "IdentityFile", "-p": "Port", "-l": "User"}
_BARE_FLAGS = {"-4": "AddressFamily=inet", "-6": "AddressFamily=inet6", "-C": "Compression=yes"}


@dataclass
class HostTarget:
    """One inventory host resolved to what a transport needs; `line` is where it is defined."""

    name: str
    line: int
    connection: str
    address: str
    root: str
    user: str | None = None
    port: int | None = None
    ssh_options: tuple[str, ...] = ()
    kind: TargetKind | None = None  # a kind's own host (its inventory_var set), e.g. k8s
    kind_value: str = ""  # that variable's value, e.g. NAMESPACE/SELECTOR (root: patchkit_root)
    kind_options: dict = field(default_factory=dict)  # its settings' patchkit_<name> variables


def resolve_host(inv: Inventory, name: str, root: str | None = None) -> HostTarget:
    variables = {}
    for key, (val, line) in inv.host_vars(name).items():
        variables[_ALIASES.get(key, key)] = (val, line)
    line = inv.hosts[name].line

    def text(key: str) -> tuple[str | None, int]:
        val, at = variables.get(key, (None, line))
        if val is None:
            return None, at
        if isinstance(val, (dict, list, tuple, bool)) or (isinstance(val, str) and "{{" in val):
            raise InventoryError(
                inv.path,
                at,
                f"host {name!r}: {key} = {val!r} is not a plain value (templates are not supported)",
            )
        return str(val), at

    kind, kind_value = None, None
    for candidate in target_kinds():  # the first kind whose own variable the host sets
        if candidate.inventory_var and kind is None:
            kind_value = text(candidate.inventory_var)[0]
            kind = candidate if kind_value else None
    connection, at = text("ansible_connection")
    connection = kind.name if kind else connection or "ssh"
    if kind is None and connection not in ("ssh", "smart", "paramiko", "local"):
        raise InventoryError(
            inv.path, at, f"host {name!r}: ansible_connection={connection} is not supported (ssh or local)"
        )
    target_root, at = (root, line) if root else text("patchkit_root")
    if not target_root:
        raise InventoryError(
            inv.path,
            line,
            f"host {name!r} has no patchkit_root variable; set one (host, group or all) or give --root",
        )
    if not target_root.startswith("/"):
        raise InventoryError(
            inv.path, at, f"host {name!r}: patchkit_root {target_root!r} must be an absolute path"
        )
    if kind is not None:
        kind_options = {
            setting.name: value for setting in kind.settings if (value := text(f"patchkit_{setting.name}")[0])
        }
        return HostTarget(
            name,
            line,
            kind.name,
            "",
            target_root,
            kind=kind,
            kind_value=str(kind_value),
            kind_options=kind_options,
        )
    address = text("ansible_host")[0] or name
    user = text("ansible_user")[0]
    port_text, at = text("ansible_port")
    port = None
    if port_text is not None:
        if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
            raise InventoryError(inv.path, at, f"host {name!r}: bad ansible_port {port_text!r}")
        port = int(port_text)
    options: list[str] = []
    key_file, at = text("ansible_ssh_private_key_file")
    if key_file:
        options.append(f"IdentityFile={os.path.expanduser(key_file)}")
    for var in ("ansible_ssh_common_args", "ansible_ssh_extra_args"):
        args, at = text(var)
        if args:
            options += _ssh_args_as_options(inv.path, at, name, var, args)
    return HostTarget(
        name,
        line,
        "local" if connection == "local" else "ssh",
        address,
        target_root,
        user,
        port,
        tuple(options),
    )


def _ssh_args_as_options(path: str, line: int, host: str, var: str, args: str) -> list[str]:
    try:
        words = shlex.split(args)
    except ValueError as e:
        raise InventoryError(path, line, f"host {host!r}: cannot split {var}: {e}") from e
    out, i = [], 0
    while i < len(words):
        word = words[i]
        if word in _BARE_FLAGS:
            out.append(_BARE_FLAGS[word])
        elif word[:2] == "-o" or word[:2] in _FLAG_OPTIONS:
            flag, value = word[:2], word[2:]
            if not value:
                i += 1
                if i == len(words):
                    raise InventoryError(path, line, f"host {host!r}: {var}: {flag} needs a value")
                value = words[i]
            if flag == "-o":
                key, sep, rest = value.partition("=")
                if not sep:
                    key, _, rest = value.partition(" ")
                if not key or not rest.strip():
                    raise InventoryError(path, line, f"host {host!r}: {var}: -o {value!r} is not Key=Value")
                out.append(f"{key}={rest.strip()}")
            else:
                out.append(f"{_FLAG_OPTIONS[flag]}={value}")
        else:
            raise InventoryError(
                path,
                line,
                f"host {host!r}: {var}: {word!r} is not supported "
                "(use -o Key=Value, -J, -i, -p, -l, -4, -6 or -C)",
            )
        i += 1
    return out


def host_transport(
    inv: Inventory,
    host: HostTarget,
    *,
    cwd: str | None = None,
    container: str | None = None,
    exec_prefix: str | None = None,
    **options,
) -> Transport:
    """A Transport for one resolved host; site ssh_options come after the host's own."""
    label = f"{host.name}:{host.root}"
    try:
        if host.connection == "local":
            transport = parse_target(
                host.root, cwd=cwd, container=container, exec_prefix=exec_prefix, **options
            )
        else:
            shown = f"[{host.address}]" if ":" in host.address else host.address
            spec = (
                f"ssh://{host.user + '@' if host.user else ''}{shown}"
                f"{':' + str(host.port) if host.port else ''}{host.root}"
            )
            options = dict(options)
            site = options.get("ssh_options") or ()
            options["ssh_options"] = list(host.ssh_options) + (
                [site] if isinstance(site, str) else list(site)
            )
            transport = parse_target(spec, cwd=cwd, container=container, exec_prefix=exec_prefix, **options)
    except InvalidInput as e:
        raise InventoryError(inv.path, host.line, f"host {host.name!r}: {e.message}") from e
    via = transport.label.partition(" via ")[2]
    transport.label = label + (f" via {via}" if via else "")
    return transport


def inventory_transports(
    path: str, limit: str | None = None, root: str | None = None, **options
) -> list[Transport]:
    """The hosts of `path` chosen by `limit`, as Transports (the caller closes them)."""
    inv = load_inventory(path)
    hosts = [resolve_host(inv, name, root) for name in inv.select(limit)]
    transports: list[Transport] = []
    try:
        for host in hosts:
            if host.kind is not None:
                transports += _kind_transports(inv, host, **options)
                continue
            transports.append(host_transport(inv, host, **options))
    except BaseException:
        for t in transports:
            t.close()
        raise
    return transports


def _kind_transports(inv: Inventory, host: HostTarget, **options) -> list[Transport]:
    """The targets a kind makes of its own host (TargetKind.inventory), the host's
    ``patchkit_<setting>`` variables over the options."""
    assert host.kind is not None and host.kind.inventory is not None, "resolve_host: a kind with a hook"
    try:
        return host.kind.inventory(
            host.kind_value, root=host.root, host=host.name, **dict(options, **host.kind_options)
        )
    except InvalidInput as e:
        raise InventoryError(inv.path, host.line, f"host {host.name!r}: {e.message}") from e
