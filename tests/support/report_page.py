"""What a report.html holds, read the way a test checks it: its sections, its links and
sources, its tooltips, and every number that names where it comes from (``data-k``: a JSON
path into summary.json, sweep.json or predict.json; ``data-v``: the value; the text: the value
as printed). See patchkit/report/html_page.py."""

from __future__ import annotations

import base64
import gzip
import json
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser


@dataclass
class Sourced:
    path: list
    value: object
    text: str


@dataclass
class Page:
    sections: list[str] = field(default_factory=list)
    sourced: list[Sourced] = field(default_factory=list)
    urls: list[str] = field(default_factory=list)  # every href, src, xlink:href and url(...)
    downloads: dict[str, str] = field(default_factory=dict)  # download name -> href
    tooltips: list[str] = field(default_factory=list)
    csp: str | None = None
    scripts: int = 0


class _Reader(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.page = Page()
        self.open: list[tuple[str, dict | None, list[str]]] = []  # (tag, source attrs, text)

    def handle_starttag(self, tag, attrs):
        self._start(tag, attrs, closed=False)

    def handle_startendtag(self, tag, attrs):  # <path .../>: nothing to close later
        self._start(tag, attrs, closed=True)

    def _start(self, tag, attrs, closed: bool):
        a = dict(attrs)
        if tag == "section" and a.get("id"):
            self.page.sections.append(a["id"])
        if tag == "script":
            self.page.scripts += 1
        if tag == "meta" and (a.get("http-equiv") or "").lower() == "content-security-policy":
            self.page.csp = a.get("content")
        for name in ("href", "src", "xlink:href", "action", "poster"):
            if a.get(name):
                self.page.urls.append(a[name])
        if a.get("style"):
            self.page.urls += re.findall(r"url\(([^)]*)\)", a["style"])
        if tag == "a" and "download" in a:
            self.page.downloads[a["download"]] = a.get("href") or ""
        source = a if "data-k" in a else None
        if closed and source is not None:
            self.page.sourced.append(Sourced(json.loads(a["data-k"]), json.loads(a["data-v"]), ""))
        elif not closed and tag not in ("meta", "link", "br", "img", "input", "hr", "wbr", "source"):
            self.open.append((tag, source, []))

    def handle_endtag(self, tag):
        while self.open:
            name, source, text = self.open.pop()
            joined = "".join(text)
            if self.open:
                self.open[-1][2].append(joined)
            if name == "title" and any(t == "svg" or t == "g" for t, _, _ in self.open):
                self.page.tooltips.append(joined)
            if source is not None:
                self.page.sourced.append(
                    Sourced(json.loads(source["data-k"]), json.loads(source["data-v"]), joined)
                )
            if name == tag:
                break

    def handle_data(self, data):
        if self.open:
            self.open[-1][2].append(data)


def read_page(html: str) -> Page:
    reader = _Reader()
    reader.feed(html)
    reader.close()
    return reader.page


def resolve(docs: dict, path: list):
    """The value at ``path`` (file name first) in ``docs`` ({"summary": {...}, ...}); a
    {"field": value} step picks the element of a list whose field equals it."""
    node = docs[path[0]]
    for step in path[1:]:
        if isinstance(step, dict):
            ((name, want),) = step.items()
            matches = [e for e in node if isinstance(e, dict) and e.get(name) == want]
            assert len(matches) == 1, f"{path}: {len(matches)} elements with {name} = {want!r}"
            node = matches[0]
        elif isinstance(node, list):
            node = node[int(step)]
        else:
            node = node[str(step)]
    return node


NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?")


def printed_as(value, text: str) -> bool:
    """Whether ``text`` prints ``value`` (a number rounded as the text rounds it, each end of an
    interval likewise, or a word as it is)."""
    if isinstance(value, str):
        return text.strip().startswith(value)
    if isinstance(value, list):
        found = NUMBER.findall(text)
        return len(found) == len(value) and all(_rounded(v, f) for v, f in zip(value, found))
    found = NUMBER.findall(text)
    return bool(found) and _rounded(value, found[0])


def _rounded(value, printed: str) -> bool:
    mantissa, _, exponent = printed.replace(",", "").partition("e")
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    unit = 10.0 ** (int(exponent or 0) - decimals)  # the last digit printed
    return abs(float(value) - float(mantissa) * 10.0 ** int(exponent or 0)) <= 0.51 * unit


def external_urls(page: Page) -> list[str]:
    """Links and sources that would leave the file: anything but in-page anchors, data: URIs
    and relative paths to files beside it (a sweep's links to its points' pages)."""
    return [u for u in page.urls if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", u) and not u.startswith("data:")]


def download_bytes(href: str) -> bytes:
    """The file a data: download link holds (gunzipped when it is gzip)."""
    head, data = href.split(",", 1)
    raw = base64.b64decode(data) if head.endswith(";base64") else data.encode()
    return gzip.decompress(raw) if "gzip" in head else raw
