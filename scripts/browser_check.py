#!/usr/bin/env python3
"""Opens a report's index.html in headless Chromium and fails on what a reader would see broken.

Usage: scripts/browser_check.py REPORT_DIR [--screenshot OUT.png] [--browser chromium]

Checks (exit 1 when any fails, 2 when the check itself cannot run):
  - every <img> of the page decodes in the browser (naturalWidth > 0), seen through a wrapper page that loads
    index.html in an iframe (Chromium's --allow-file-access-from-files lets it read the frame's images);
  - every relative <a href> and <img src> names a file of the report folder;
  - the page renders: a full-page screenshot is written (the CI keeps it) and is not empty.
Nothing here reaches a shell: the browser runs from an argument list.
"""
import argparse
import html
import json
import os
import shutil
import subprocess
import sys
import tempfile
from html.parser import HTMLParser
from urllib.parse import unquote, urlparse


class Targets(HTMLParser):
    """Collects the relative targets of <img src> and <a href>."""

    def __init__(self):
        super().__init__()
        self.images, self.links = [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img" and a.get("src"):
            self.images.append(a["src"])
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])


def local(target):
    """The file a relative URL names, or None for an external link or an anchor."""
    u = urlparse(target)
    if u.scheme or u.netloc or not u.path:
        return None
    return unquote(u.path)


WRAPPER = """<!DOCTYPE html><html><body><iframe id="f" src="{src}" style="width:1200px;height:4000px"></iframe>
<script>
document.getElementById('f').addEventListener('load', () => {{
  const d = document.getElementById('f').contentDocument;
  const images = [...d.images].map(i => ({{src: i.getAttribute('src'), width: i.naturalWidth}}));
  document.body.setAttribute('data-images', JSON.stringify(images));
}});
</script></body></html>
"""


def run_browser(browser, args, timeout=120):
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"] + args
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("report_dir")
    p.add_argument("--screenshot", help="write a full-page PNG here (default REPORT_DIR/screenshot.png)")
    p.add_argument("--browser", default=os.environ.get("AOBENCH_BROWSER", "chromium"))
    a = p.parse_args()
    index = os.path.abspath(os.path.join(a.report_dir, "index.html"))
    if not os.path.isfile(index):
        print(f"browser_check: {index} does not exist (run `aobench report DIR` first)", file=sys.stderr)
        return 2
    browser = shutil.which(a.browser)
    if not browser:
        print(f"browser_check: no '{a.browser}' browser (Debian package chromium)", file=sys.stderr)
        return 2
    folder = os.path.dirname(index)
    problems = []

    parser = Targets()
    with open(index, encoding="utf-8") as f:
        parser.feed(f.read())
    for kind, targets in (("image", parser.images), ("link", parser.links)):
        for t in targets:
            path = local(t)
            if path is not None and not os.path.isfile(os.path.join(folder, path)):
                problems.append(f"{kind} '{t}' names no file of {folder}")

    with tempfile.TemporaryDirectory() as tmp:
        wrapper = os.path.join(tmp, "wrapper.html")
        with open(wrapper, "w", encoding="utf-8") as f:
            f.write(WRAPPER.format(src=html.escape("file://" + index, quote=True)))
        r = run_browser(browser, ["--allow-file-access-from-files", "--virtual-time-budget=5000", "--dump-dom",
                                  "file://" + wrapper])
        marker = 'data-images="'
        start = r.stdout.find(marker)
        if r.returncode != 0 or start < 0:
            print(f"browser_check: {browser} did not render the page (exit {r.returncode}):\n{r.stderr[-2000:]}",
                  file=sys.stderr)
            return 2
        end = r.stdout.find('"', start + len(marker))
        images = json.loads(html.unescape(r.stdout[start + len(marker):end]))
        for img in images:
            if img["width"] <= 0:
                problems.append(f"image '{img['src']}' does not load in the browser")

    shot = os.path.abspath(a.screenshot or os.path.join(folder, "screenshot.png"))
    r = run_browser(browser, ["--window-size=1280,4000", "--virtual-time-budget=5000", "--screenshot=" + shot,
                              "file://" + index])
    if r.returncode != 0 or not os.path.isfile(shot) or os.path.getsize(shot) < 10000:
        problems.append(f"no screenshot of the page ({shot}; exit {r.returncode})")

    print(f"browser_check: {index}: {len(images)} image(s), {len(parser.links)} link(s) checked; screenshot {shot}")
    for msg in problems:
        print(f"browser_check: FAIL: {msg}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
