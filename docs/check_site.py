"""Check the built documentation site in a real browser: headless Chromium.

    python docs/check_site.py                 # build (mkdocs build --strict), serve, check
    python docs/check_site.py --site site     # check a site built already

Serves the site on a local port, starts Chromium headless with its DevTools port, and
over the DevTools websocket (the `websocket-client` package of the `docs` extra) loads
every page of the site. A page fails on any console error, uncaught exception, failed
request (a missing stylesheet, script or image) or load that does not finish, and on
what a reader should not see: a reStructuredText `::` in the text (outside code), a
backslash-escaped `|` (a table's escape shown as is), a line of code wider than its
box. Then it
types a function name into the site's search (`?q=convert`) and fails unless a result
links to the API reference. Exits 0 when all is well; prints one line per page.

Needs `chromium` (Debian: `apt-get install -y chromium`) or `--chromium PATH`. Not run
by CI (no browser there); run it after changing the site's theme, hooks or layout.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def serve(site: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    handler = functools.partial(_Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


class DevTools:
    """A minimal Chrome DevTools Protocol client on one page target."""

    def __init__(self, ws_url: str):
        import websocket  # websocket-client

        self.ws = websocket.create_connection(ws_url, timeout=30, suppress_origin=True)
        self.next_id = 0
        self.events: list[dict] = []

    def call(self, method: str, **params):
        self.next_id += 1
        my_id = self.next_id
        self.ws.send(json.dumps({"id": my_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == my_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def wait_for(self, method: str, timeout: float = 30.0) -> dict:
        deadline = time.monotonic() + timeout
        for i, ev in enumerate(self.events):
            if ev.get("method") == method:
                return self.events.pop(i)
        self.ws.settimeout(1.0)
        try:
            while time.monotonic() < deadline:
                try:
                    msg = json.loads(self.ws.recv())
                except Exception:  # noqa: BLE001 - a receive timeout: poll again
                    continue
                if msg.get("method") == method:
                    return msg
                self.events.append(msg)
        finally:
            self.ws.settimeout(30)
        raise TimeoutError(f"no {method} within {timeout} s")

    def evaluate(self, expression: str):
        res = self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                        awaitPromise=True)
        return res.get("result", {}).get("value")

    def drain(self, seconds: float = 0.5):
        """Collect the events that arrive within ``seconds``."""
        self.ws.settimeout(0.1)
        end = time.monotonic() + seconds
        try:
            while time.monotonic() < end:
                try:
                    self.events.append(json.loads(self.ws.recv()))
                except Exception:  # noqa: BLE001 - a receive timeout
                    pass
        finally:
            self.ws.settimeout(30)


def problems(events: list[dict]) -> list[str]:
    out = []
    for ev in events:
        method, p = ev.get("method"), ev.get("params", {})
        if method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            out.append("console error: " + " ".join(
                str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            out.append("exception: " + d.get("exception", {}).get("description", d.get("text", "")))
        elif method == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            e = p["entry"]
            out.append(f"log error: {e.get('text')} {e.get('url', '')}".strip())
        elif method == "Network.loadingFailed" and not p.get("canceled"):
            out.append(f"request failed: {p.get('errorText')}")
        elif method == "Network.responseReceived" and p.get("response", {}).get("status", 200) >= 400:
            r = p["response"]
            out.append(f"HTTP {r['status']}: {r['url']}")
    return out


# What a reader must never see in a page's text: reStructuredText's `::` ending a
# paragraph (a docstring written for Sphinx), outside code; a backslash-escaped `|` (a
# Markdown table cell's escape shown as is, `case 0 \| 1:` in a code span); and a code
# block wider than its box (a line that runs out of sight).
_RENDERING = r"""
(() => {
  const root = document.querySelector('.md-content') || document.body;
  const out = [];
  const walk = (n) => {
    if (n.nodeType === 3) {
      const t = n.textContent;
      const inCode = n.parentElement.closest('pre, code');
      const at = (i) => JSON.stringify(t.slice(Math.max(0, i - 50), i + 10));
      if (t.includes('\\|')) out.push('a backslash-escaped | in the text: ' + at(t.indexOf('\\|')));
      if (!inCode && t.includes('::')) out.push('reStructuredText :: in the text: ' + at(t.indexOf('::')));
    } else if (n.nodeType === 1 && !['SCRIPT', 'STYLE'].includes(n.tagName)) {
      n.childNodes.forEach(walk);
    }
  };
  walk(root);
  document.querySelectorAll('pre > code').forEach((c) => {
    if (c.scrollWidth > c.clientWidth + 1) {
      const longest = c.innerText.split('\n').sort((a, b) => b.length - a.length)[0];
      out.push('a code line wider than its box (cut off or hidden): ' + JSON.stringify(longest.slice(-40)));
    }
  });
  return out;
})()
"""


def rendering_problems(dt) -> list[str]:
    return dt.evaluate(_RENDERING) or []


def pages(site: Path) -> list[str]:
    return sorted(str(p.relative_to(site).parent).replace(os.sep, "/") + "/"
                  for p in site.rglob("index.html")
                  if p.relative_to(site).parts[0] not in ("assets", "search"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--site", help="a built site (default: build one with mkdocs --strict)")
    ap.add_argument("--chromium", default=shutil.which("chromium") or shutil.which("chromium-browser")
                    or shutil.which("google-chrome"))
    ap.add_argument("--query", default="convert", help="what to search for")
    args = ap.parse_args(argv)
    if not args.chromium:
        print("error: no chromium found (apt-get install -y chromium, or --chromium PATH)",
              file=sys.stderr)
        return 2

    tmp = Path(tempfile.mkdtemp(prefix="autoflow-site-"))
    try:
        if args.site:
            site = Path(args.site).resolve()
        else:
            site = tmp / "site"
            subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
                            "--site-dir", str(site)], cwd=ROOT, check=True,
                           env=dict(os.environ, NO_MKDOCS_2_WARNING="1"))
        server, base = serve(site)
        port = free_port()
        browser = subprocess.Popen(
            [args.chromium, "--headless=new", "--no-sandbox", "--disable-gpu",
             "--no-first-run", "--no-default-browser-check", f"--remote-debugging-port={port}",
             f"--user-data-dir={tmp / 'profile'}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            return check(base, port, site, args.query)
        finally:
            browser.terminate()
            try:
                browser.wait(timeout=10)
            except subprocess.TimeoutExpired:
                browser.kill()
            server.shutdown()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def check(base: str, port: int, site: Path, query: str) -> int:
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=2) as r:
                targets = [t for t in json.load(r) if t.get("type") == "page"]
            if targets:
                break
        except OSError:
            pass
        if time.monotonic() > deadline:
            print("error: Chromium's DevTools port did not answer", file=sys.stderr)
            return 2
        time.sleep(0.3)
    dt = DevTools(targets[0]["webSocketDebuggerUrl"])
    for domain in ("Page", "Runtime", "Log", "Network"):
        dt.call(f"{domain}.enable")
    version = dt.evaluate("navigator.userAgent")
    print(f"chromium: {version}")

    failed = 0
    all_pages = pages(site)
    for rel in all_pages:
        dt.events.clear()
        dt.call("Page.navigate", url=base + ("" if rel == "./" else rel))
        try:
            dt.wait_for("Page.loadEventFired", timeout=30)
        except TimeoutError:
            print(f"FAIL {rel}: the page did not finish loading")
            failed += 1
            continue
        dt.drain(0.7)  # late console errors (scripts run after load)
        title = dt.evaluate("document.title")
        found = problems(dt.events)
        if not title:
            found.append("no title")
        found += rendering_problems(dt)
        print(("FAIL " if found else "ok   ") + f"{rel or './'}  ({title})")
        for p in found:
            print("       " + p)
        failed += bool(found)

    # Search: the theme's search box, filled from the URL (?q=...), answered by its worker.
    dt.events.clear()
    dt.call("Page.navigate", url=f"{base}?q={query}")
    dt.wait_for("Page.loadEventFired", timeout=30)
    results = []
    for _ in range(60):
        results = dt.evaluate(
            "Array.from(document.querySelectorAll('.md-search-result__item a'))"
            ".map(a => [a.getAttribute('href'), a.innerText.split('\\n')[0]])") or []
        if results:
            break
        time.sleep(0.25)
    dt.drain(0.3)
    found = problems(dt.events)
    api_hit = [r for r in results if "api/" in (r[0] or "")]
    ok = bool(api_hit) and not found
    print(("ok   " if ok else "FAIL ") + f"search {query!r}: {len(results)} results"
          + (f", the API reference among them ({api_hit[0][0]})" if api_hit else
             ", none in the API reference"))
    for p in found:
        print("       " + p)
    failed += not ok
    print(f"{len(all_pages)} pages, search: {'ok' if ok else 'failed'}; "
          f"{failed} failure{'s' if failed != 1 else ''}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
