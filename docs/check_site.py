"""Look at the built documentation site in headless Chromium.

    mkdocs build --strict && python docs/check_site.py [--site site] [--screenshots docs/screenshots]

Serves the built site on 127.0.0.1 (an ephemeral port), opens the pages of :data:`PAGES` (home,
Getting started, the measures and adjoint sections of the theory, the ``forward``,
``DiscreteAdjoint`` and ``GaussianMeasure`` API entries, two notebooks) in headless Chromium
(driven over the DevTools protocol), with every host but 127.0.0.1 unresolvable, so a resource fetched from
elsewhere fails. For each page it waits for MathJax to finish and checks that

- nothing was logged to the console as an error, no script threw, no resource failed to load;
- no raw TeX is left in the visible text outside code: neither delimiters MathJax should have
  consumed (``\\(``, ``\\[``, ``$$``, ``$...$``) nor maths that was never delimited
  (:func:`undelimited_tex`: ``n^{-1/2}``, ``δ_{z_j}``, ``w_j``, ``R^d``, ``\\frac``), except in the
  sections of :data:`PENDING_TEX`; no MathJax error, and where the page has maths MathJax rendered
  it;

then saves a screenshot (``site_<page>.png``). Exit status 0 when every page passes, 1 otherwise
(each failure printed). Needs Chromium (Debian: ``apt-get install chromium``) and the docs extra
(``websocket-client``).
"""

from __future__ import annotations

import argparse
import base64
import functools
import html.parser
import http.server
import json
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: (name, path under the site, needs rendered maths)
PAGES = (
    ("home", "", True),
    ("getting_started", "getting-started/#a-forward-solve-and-its-gradient", False),
    ("theory_measures", "theory/#11-measures", True),
    ("theory_adjoint", "theory/#21-continuous-form", True),
    ("forward", "api/forward/#cfm_jax.forward", False),
    ("discrete_adjoint", "api/adjoints/#cfm_jax.DiscreteAdjoint", False),
    ("measures", "api/measures/#cfm_jax.GaussianMeasure", True),
    ("notebook_quickstart", "notebooks/quickstart/", True),
    ("notebook_chaos", "notebooks/chaos/", True),
)

#: Sections ("page#heading id") whose undelimited maths comes from outside docs/ and notebooks/:
#: the chaos module's docstrings (rendered by mkdocstrings) and the claims table the claims experiment
#: writes (experiments/results/claims/claims.md). They are fixed where they are written (maths
#: between $...$, which the site and a terminal both read), then removed from here. Any other
#: section with raw TeX fails.
PENDING_TEX: frozenset[str] = frozenset()

# Visible text outside code, per section (the id of the heading above it; "" before the first),
# after MathJax ran; MathJax's own elements and its TeX sources (<script type="math/tex">) are skipped.
_INSPECT = r"""
(() => {
  const skip = new Set(["SCRIPT", "STYLE", "CODE", "PRE", "NOSCRIPT", "TEXTAREA"]);
  const sections = {"": []};
  let current = "";
  const walk = (node) => {
    if (node.nodeType === Node.TEXT_NODE) { sections[current].push(node.textContent); return; }
    if (node.nodeType !== Node.ELEMENT_NODE || skip.has(node.tagName)) return;
    if (node.hidden || getComputedStyle(node).display === "none") return;  // not shown to a reader
    if (node.classList.contains("MathJax") || node.classList.contains("MathJax_Display") ||
        node.classList.contains("MathJax_Preview")) return;
    if (/^H[1-6]$/.test(node.tagName) && node.id) { current = node.id; sections[current] = sections[current] || []; }
    for (const child of node.childNodes) walk(child);
  };
  walk(document.body);
  for (const id in sections) sections[id] = sections[id].join(" ");
  return JSON.stringify({
    sections: sections,
    rendered: document.querySelectorAll(".MathJax, .MathJax_Display").length,
    errors: document.querySelectorAll(".MathJax_Error, merror, .merror").length,
    title: document.title,
  });
})()
"""


# TeX-like notation in prose, which shows raw unless it sits between maths delimiters:
# sub/superscripts in braces, TeX commands, and a one-letter base with a one-character
# sub/superscript (w_j, Σ_j, x_1, s_a², R^d, e^β). Identifiers (cfm_jax, max_steps, n_ref=16) and
# numbers (2^14) do not match.
_TEX_LIKE = re.compile(
    r"\^\{|_\{"
    r"|\\[A-Za-z]{2,}"
    r"|(?<![\w.\-/])[^\W\d_]_[^\W_](?![^\W\d_\u00b2\u00b3\u00b9\u2070-\u2079])"  # not followed by a letter
    r"|(?<![\w.\-/])[^\W\d_]\^[^\W_]"
)
# maths MathJax typesets (the delimiters of docs/_overrides/main.html): removed before looking
_DELIMITED = re.compile(r"\$\$.+?\$\$|\\\[.+?\\\]|\\\(.+?\\\)|(?<!\\)\$[^$]+?(?<!\\)\$", re.S)


def undelimited_tex(text: str, context: int = 20) -> list[str]:
    """TeX-like maths outside any maths delimiters in ``text`` (visible text, code removed), each
    hit with ``context`` characters around it."""
    text = _DELIMITED.sub(" ", text)
    return [" ".join(text[max(0, m.start() - context) : m.end() + context].split()) for m in _TEX_LIKE.finditer(text)]


class _VisibleText(html.parser.HTMLParser):
    """The text a reader sees before MathJax runs, without code, scripts and arithmatex's maths."""

    _SKIP = frozenset({"script", "style", "code", "pre", "textarea", "noscript", "svg", "template"})
    _VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, bool]] = []
        self.parts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self._VOID:
            return
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        skip = (
            tag in self._SKIP
            or "hidden" in a
            or "arithmatex" in classes  # maths, for MathJax
            or "clipboard-copy-txt" in classes  # a notebook cell's source again, hidden, for the copy button
        )
        self.stack.append((tag, skip))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        if not any(skip for _, skip in self.stack):
            self.parts.append(data)


def visible_text(page: str) -> str:
    """The visible text of an HTML page outside code, scripts and maths spans (a static view: no
    browser, so ``$...$`` of the notebooks is still there; :func:`undelimited_tex` skips it)."""
    parser = _VisibleText()
    parser.feed(page)
    return " ".join(parser.parts)


def raw_tex(text: str) -> list[str]:
    """Fragments of unrendered TeX in visible text after MathJax ran: leftover delimiters and
    maths that was never delimited."""
    found = [m.group(0) for m in re.finditer(r"\\\(|\\\[|\$\$", text)]
    found += [m.group(0) for m in re.finditer(r"\$[^$\s][^$\n]{0,80}?\$", text)]
    return found + undelimited_tex(text)


def serve(site: Path) -> tuple[http.server.ThreadingHTTPServer, int]:
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class DevTools:
    """A minimal Chrome DevTools Protocol client for one page target."""

    def __init__(self, ws_url: str):
        import websocket  # websocket-client

        self.ws = websocket.create_connection(
            ws_url, timeout=300
        )  # MathJax on the theory page takes minutes on a loaded machine
        self.next_id = 0
        self.events: list[dict] = []

    def call(self, method: str, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def wait_for(self, method: str, timeout: float = 300.0):
        end = time.monotonic() + timeout
        for i, ev in enumerate(self.events):
            if ev.get("method") == method:
                return self.events.pop(i)
        while time.monotonic() < end:
            msg = json.loads(self.ws.recv())
            if msg.get("method") == method:
                return msg
            self.events.append(msg)
        raise TimeoutError(method)

    def evaluate(self, expression: str, await_promise: bool = False):
        res = self.call("Runtime.evaluate", expression=expression, awaitPromise=await_promise, returnByValue=True)
        if "exceptionDetails" in res:
            raise RuntimeError(f"evaluate failed: {res['exceptionDetails']}")
        return res["result"].get("value")


def problems_in(events: list[dict]) -> list[str]:
    """Console errors, uncaught exceptions and failed loads among the collected events."""
    out = []
    for ev in events:
        method, p = ev.get("method"), ev.get("params", {})
        if method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            out.append(
                "console.error: " + " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
            )
        elif method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            out.append(f"exception: {d.get('exception', {}).get('description') or d.get('text')}")
        elif method == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            e = p["entry"]
            out.append(f"log error: {e.get('text')} {e.get('url', '')}")
        elif method == "Network.loadingFailed" and not p.get("canceled"):
            out.append(f"failed load: {p.get('errorText')} (request {p.get('requestId')})")
    return out


def _save_small_png(png: bytes, path: Path) -> None:
    """Write the screenshot with a 256-colour palette (Pillow, which matplotlib brings), else as is."""
    try:
        import io

        from PIL import Image
    except ImportError:
        path.write_bytes(png)
        return
    Image.open(io.BytesIO(png)).convert("RGB").quantize(256).save(path, optimize=True)


def check(site: Path, shots: Path, chromium: str) -> list[str]:
    server, port = serve(site)
    debug_port = free_port()
    profile = tempfile.mkdtemp(prefix="cfm_jax_chromium_")
    browser = subprocess.Popen(
        [
            chromium,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--hide-scrollbars",
            "--window-size=1280,900",
            f"--user-data-dir={profile}",
            f"--remote-debugging-port={debug_port}",
            f"--remote-allow-origins=http://127.0.0.1:{debug_port}",  # Chromium >= 111 checks the Origin
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    failures: list[str] = []
    try:
        base = f"http://127.0.0.1:{debug_port}"
        for _ in range(100):
            try:
                targets = json.load(urllib.request.urlopen(f"{base}/json/list", timeout=2))
                break
            except OSError:
                time.sleep(0.2)
        else:
            return ["chromium did not start its DevTools endpoint"]
        page = next(t for t in targets if t.get("type") == "page")
        tools = DevTools(page["webSocketDebuggerUrl"])
        for domain in ("Page", "Runtime", "Log", "Network"):
            tools.call(f"{domain}.enable")
        tools.call("Emulation.setDeviceMetricsOverride", width=1280, height=900, deviceScaleFactor=1, mobile=False)
        for name, path, needs_maths in PAGES:
            tools.events.clear()
            url = f"http://127.0.0.1:{port}/{path}"
            if tools.call("Page.navigate", url=url).get("loaderId"):
                tools.wait_for("Page.loadEventFired")
            # else: the same page at another anchor (a same-document navigation fires no load event)
            # MathJax 2 typesets asynchronously: wait until its queue has run
            tools.evaluate(
                "new Promise(r => (window.MathJax && MathJax.Hub) ? MathJax.Hub.Queue(() => r(true)) : r(false))",
                await_promise=True,
            )
            if "#" in path:  # scroll to the entry again: typesetting may have moved it
                tools.evaluate(f"document.getElementById({json.dumps(path.split('#')[1])}).scrollIntoView()")
            time.sleep(0.5)
            info = json.loads(tools.evaluate(_INSPECT))
            shot = base64.b64decode(tools.call("Page.captureScreenshot", format="png")["data"])
            _save_small_png(shot, shots / f"site_{name}.png")
            page_failures = problems_in(tools.events)
            page = path.split("#")[0]
            tex = {
                ident: hits
                for ident, text in info["sections"].items()
                if (hits := raw_tex(text)) and f"{page}#{ident}" not in PENDING_TEX
            }
            if tex:
                page_failures.append(f"raw TeX left in the page: {dict(list(tex.items())[:3])}")
            if info["errors"]:
                page_failures.append(f"{info['errors']} MathJax error(s)")
            if needs_maths and not info["rendered"]:
                page_failures.append("no maths rendered")
            status = "ok" if not page_failures else "FAILED"
            size = (shots / f"site_{name}.png").stat().st_size // 1024
            print(
                f"{name:>20}: {status}; {info['rendered']} maths rendered; title {info['title']!r}; "
                f"screenshot {shots / f'site_{name}.png'} ({size} KiB)"
            )
            failures += [f"{name}: {f}" for f in page_failures]
        tools.ws.close()
    finally:
        browser.terminate()
        try:
            browser.wait(10)
        except subprocess.TimeoutExpired:
            browser.kill()
        server.shutdown()
        shutil.rmtree(profile, ignore_errors=True)
    return failures


def main(argv=None) -> int:
    assert __doc__ is not None  # the module docstring is the description
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", type=Path, default=ROOT / "site", help="the built site (default: site/)")
    parser.add_argument(
        "--screenshots",
        type=Path,
        default=ROOT / "docs" / "screenshots",
        help="where the PNGs go (default: docs/screenshots/)",
    )
    parser.add_argument(
        "--chromium", default=shutil.which("chromium") or shutil.which("chromium-browser"), help="the Chromium binary"
    )
    args = parser.parse_args(argv)
    if not args.chromium:
        print("check_site: error: chromium not found (apt-get install chromium)", file=sys.stderr)
        return 2
    if not (args.site / "index.html").is_file():
        print(f"check_site: error: no built site in {args.site} (run mkdocs build first)", file=sys.stderr)
        return 2
    args.screenshots.mkdir(parents=True, exist_ok=True)
    failures = check(args.site, args.screenshots, args.chromium)
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
