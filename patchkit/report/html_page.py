"""The frame of report.html: one file, styles inline, no script, nothing fetched.

The page's Content-Security-Policy is ``default-src 'none'`` (inline styles and data: images
allowed): whatever a future edit adds, a browser opening the file offline fetches nothing.
Numbers taken from summary.json (or sweep.json, predict.json) carry their source: ``data-k``
the path to it as a JSON list (the file, then keys, list indices, and ``{"name": ...}`` for the
element of a list that has that field: ``["summary", "decode_cycle", "phase_shares",
"verify"]``), ``data-v`` the exact value as JSON, the element's text the value as a person
reads it; the browser tests compare all three.
"""

from __future__ import annotations

import base64
import gzip
import json
from html import escape
from pathlib import Path

from patchkit.report.bootstrap import DASH

PAGE_FILE = "report.html"

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"

STYLE = """
:root { color-scheme: light; --ink: #1d2430; --dim: #5b6472; --rule: #d8dde5; --band: #f4f6f9;
  --accent: #1f5fa8; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
  color: var(--ink); background: #fff; }
main { max-width: 1120px; margin: 0 auto; padding: 20px 28px 60px; }
header.top { border-bottom: 3px solid var(--accent); padding-bottom: 10px; margin-bottom: 8px; }
h1 { font-size: 22px; margin: 0 0 4px; }
.sub { color: var(--dim); margin: 0; }
nav { margin: 10px 0 4px; font-size: 14px; }
nav a { color: var(--accent); margin-right: 14px; text-decoration: none; }
section { margin-top: 28px; }
h2 { font-size: 18px; margin: 0 0 6px; padding-bottom: 3px; border-bottom: 1px solid var(--rule); }
h3 { font-size: 15px; margin: 16px 0 4px; }
p.lead { margin: 4px 0 10px; }
.note { color: var(--dim); font-size: 13px; margin: 6px 0; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 3px 18px; margin: 10px 0; }
dl.facts dt { color: var(--dim); }
dl.facts dd { margin: 0; overflow-wrap: anywhere; }
.big { font-size: 20px; font-weight: 600; }
code, pre { font: 12.5px/1.4 ui-monospace, "DejaVu Sans Mono", Menlo, monospace; }
dd code { background: var(--band); padding: 1px 4px; border-radius: 3px; }
pre { background: var(--band); padding: 10px 12px; overflow-x: auto; border-radius: 4px; }
table { border-collapse: collapse; margin: 8px 0; font-size: 13.5px; font-variant-numeric: tabular-nums; }
th, td { padding: 3px 10px; border-bottom: 1px solid var(--rule); text-align: right; }
th { background: var(--band); font-weight: 600; }
td.txt, th.txt { text-align: left; }
.swatch { display: inline-block; width: 10px; height: 10px; margin-right: 6px; border-radius: 2px; }
.row { display: flex; flex-wrap: wrap; gap: 18px; align-items: flex-start; }
.row > .fig, .row > figure { flex: 1 1 560px; min-width: 0; }
figure { margin: 6px 0; }
svg.fig { width: 100%; height: auto; max-width: 100%; }
.verdict { font-size: 17px; font-weight: 600; padding: 8px 12px; background: var(--band);
  border-left: 4px solid var(--accent); margin: 8px 0; }
.bad { color: #b02a2a; }
p.warning { color: #b02a2a; font-weight: 600; margin: 6px 0; padding: 6px 10px; border-left: 4px solid #b02a2a;
  background: #fbf0f0; }
a.download { display: inline-block; padding: 6px 12px; border: 1px solid var(--accent); border-radius: 4px;
  color: var(--accent); text-decoration: none; font-weight: 600; }
details > summary { cursor: pointer; color: var(--accent); }
"""


def esc(value) -> str:
    return escape(str(value), quote=True)


def fmt(value, spec: str = ".1f", unit: str = "") -> str:
    """A number as the page prints it; ``-`` for a missing one."""
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return esc(value)
    return f"{value:{spec}}{unit}"


def S(*path) -> tuple:
    """The path of a summary.json value (see the module docstring)."""
    return ("summary", *path)


def _source(key: tuple | None, value) -> str:
    if key is None or value is None:
        return ""
    return f' data-k="{esc(json.dumps(list(key)))}" data-v="{esc(json.dumps(value))}"'


def num(value, spec: str = ".1f", unit: str = "", key: tuple | None = None, tag: str = "td") -> str:
    """One number in a cell (or ``tag``), with its source path and exact value when it has one."""
    return f"<{tag}{_source(key, value)}>{fmt(value, spec, unit)}</{tag}>"


def interval(ci, spec: str = ".1f", unit: str = "", key: tuple | None = None) -> str:
    """A [low, high] interval cell, printed ``[low-high]``."""
    if not ci:
        return "<td>-</td>"
    return f"<td{_source(key, list(ci))}>[{ci[0]:{spec}}{DASH}{ci[1]:{spec}}]{unit}</td>"


def table(head: list[str], rows: list[str], cls: str = "", text_cols: tuple = (0,)) -> str:
    """``rows``: each row's cells already rendered (``<td>...</td>`` strings joined);
    ``text_cols``: the columns of words, aligned left (numbers align right)."""
    th = "".join(
        f'<th class="txt">{esc(h)}</th>' if i in text_cols else f"<th>{esc(h)}</th>"
        for i, h in enumerate(head)
    )
    body = "".join(f"<tr>{r}</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>'


def facts(items: list[tuple[str, str]]) -> str:
    """A definition list: (label, html) pairs; pairs whose html is empty are left out."""
    body = "".join(f"<dt>{esc(k)}</dt><dd>{v}</dd>" for k, v in items if v)
    return f'<dl class="facts">{body}</dl>'


def section(sid: str, title: str, body: str) -> str:
    return f'<section id="{esc(sid)}"><h2>{esc(title)}</h2>{body}</section>'


def figure(svg: str, caption: str = "") -> str:
    cap = f'<figcaption class="note">{caption}</figcaption>' if caption else ""
    return f"<figure>{svg}{cap}</figure>"


# a data: link longer than this is more than Chromium takes as a URL (2 MiB): the trace then
# stays beside the page only (about 25,000 decode cycles of an EAGLE worker, gzipped)
EMBED_MAX_CHARS = 2_000_000

PERFETTO = (
    "To look at it: open <code>ui.perfetto.dev</code> in a browser, choose <b>Open trace file</b> and "
    "pick the file (Perfetto reads gzipped JSON as it is; the trace stays on your machine). A process "
    "per rank, CPU and GPU lanes, each cycle a span with its phases nested; stalls are named "
    "<code>STALL</code>."
)


def trace_download(trace_path: Path, name: str = "trace.json.gz") -> str:
    """The trace, gzipped, as a data: link the browser saves (no script, nothing fetched), and
    how to open it: Perfetto's deep links do not reach a file:// page, so the page carries it."""
    raw = Path(trace_path).read_bytes()
    packed = gzip.compress(raw, compresslevel=9, mtime=0)
    data = base64.b64encode(packed).decode("ascii")
    beside = f"{len(raw) / 1024:,.0f} KiB as {esc(Path(trace_path).name)} beside this page"
    if len(data) > EMBED_MAX_CHARS:
        return (
            f'<p class="lead">Not carried in this page: {len(packed) / 2**20:,.1f} MiB gzipped is more than '
            f"a browser saves from a link; it is {beside}.</p><p>{PERFETTO}</p>"
        )
    return (
        f'<p><a class="download" download="{esc(name)}" href="data:application/gzip;base64,{data}">'
        f'Save {esc(name)}</a> <span class="note">{len(packed) / 1024:,.0f} KiB gzipped; {beside}</span></p>'
        f"<p>{PERFETTO}</p>"
    )


def page(title: str, subtitle: str, nav: list[tuple[str, str]], body: str) -> str:
    links = "".join(f'<a href="#{esc(sid)}">{esc(label)}</a>' for sid, label in nav)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{STYLE}</style></head><body><main>"
        f'<header class="top"><h1>{esc(title)}</h1><p class="sub">{subtitle}</p>'
        f"<nav>{links}</nav></header>{body}"
        '<p class="note" style="margin-top:40px">Written by patchkit. One file: nothing on this '
        "page is fetched from anywhere; rest the pointer on a bar or point for its numbers.</p>"
        "</main></body></html>\n"
    )
