#!/usr/bin/env python3
"""The HTML plan report, rendered: `dpc plan --html` pages opened from disk in headless Chromium.

    html_report_test.py DPC SOURCE_DIR WORK_DIR

For each case the test writes the page, loads it in Chromium driven over the DevTools protocol
(--remote-debugging-pipe: NUL-separated JSON on file descriptors 3 and 4, no websocket or npm),
and checks that
  - no request leaves the page: every URL the page asks for is the file itself or a data: URI;
  - the placement picture, the timeline (a row per device, each with drawn intervals), the memory
    bars and the tables (a row per device; with --strategy auto, a row per strategy the command
    printed) are there and have a size on screen;
  - the page fits a laptop's width (1366 pixels) without scrolling sideways;
and saves a screenshot of what a laptop screen shows (WORK_DIR/<case>.png) and of the whole page.
A bad --html path is refused naming it, before anything runs. Without Chromium it exits 77, which
CTest reports as skipped (scripts/setup installs the Debian package `chromium`).
"""
import base64
import fcntl
import json
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time

SKIP = 77
fails = 0


def check(ok, what, detail=""):
    global fails
    if ok:
        print("ok   " + what)
    else:
        print("FAIL " + what + (": " + detail if detail else ""))
        fails += 1


def find_chromium():
    env = os.environ.get("DPC_CHROMIUM")
    if env:
        return env if os.access(env, os.X_OK) else None
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    """Chromium over the DevTools pipe: commands out on fd 3, replies and events in on fd 4."""

    def __init__(self, exe, profile):
        to_r, self.to_w = os.pipe()
        self.from_r, from_w = os.pipe()
        # the child's ends moved above 4, so that putting them on 3 and 4 clobbers neither
        for name in ("to_r", "from_w"):
            fd = locals()[name]
            high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
            os.close(fd)
            if name == "to_r":
                to_r = high
            else:
                from_w = high

        def fds():  # the child's fds 3 and 4 are the pipe's ends (inheritable: dup2's default)
            os.dup2(to_r, 3)
            os.dup2(from_w, 4)

        args = [exe, "--headless", "--remote-debugging-pipe", "--no-first-run",
                "--no-default-browser-check", "--disable-gpu", "--disable-extensions",
                "--disable-background-networking", "--disable-sync", "--hide-scrollbars",
                "--user-data-dir=" + profile, "about:blank"]
        if os.geteuid() == 0:
            args.insert(1, "--no-sandbox")  # Chromium refuses to sandbox as root
        self.log = open(os.path.join(profile, "chromium.log"), "w")
        # close_fds would close 3 and 4 after fds() ran; every other fd Python opened is
        # close-on-exec already
        self.proc = subprocess.Popen(args, close_fds=False, preexec_fn=fds,
                                     stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)
        os.close(to_r)
        os.close(from_w)
        self.buf = b""
        self.next_id = 0
        self.events = []

    def _read(self, deadline):
        while b"\0" not in self.buf:
            if time.time() > deadline:
                raise TimeoutError("Chromium did not answer in time")
            r, _, _ = select.select([self.from_r], [], [], max(0.0, deadline - time.time()))
            if not r:
                continue
            chunk = os.read(self.from_r, 1 << 20)
            if not chunk:
                raise EOFError("Chromium closed the DevTools pipe (see chromium.log)")
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def send(self, method, params=None, session=None, timeout=30):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.to_w, json.dumps(msg).encode() + b"\0")
        deadline = time.time() + timeout
        while True:
            m = self._read(deadline)
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError("%s: %s" % (method, m["error"]))
                return m.get("result", {})
            self.events.append(m)

    def wait_event(self, method, session, timeout=30):
        deadline = time.time() + timeout
        while True:
            for i, e in enumerate(self.events):
                if e.get("method") == method and e.get("sessionId") == session:
                    return self.events.pop(i)
            self.events.append(self._read(deadline))

    def close(self):
        try:
            self.send("Browser.close", timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


# What the page holds, measured in the browser.
PROBE = r"""(() => {
  const box = e => { if (!e) return [0, 0]; const r = e.getBoundingClientRect();
                     return [Math.round(r.width), Math.round(r.height)]; };
  const all = s => Array.from(document.querySelectorAll(s));
  return JSON.stringify({
    placement: box(document.querySelector('#placement svg')),
    placementNodes: all('#placement svg g.node').length,
    placementNote: (document.querySelector('#placement p.note') || {}).textContent || '',
    timeline: box(document.querySelector('#timeline svg')),
    rows: all('#timeline svg g.device').map(g => [g.querySelector('text').textContent,
                                                  g.querySelectorAll('rect.span').length]),
    memory: box(document.querySelector('#memory svg')),
    memRows: all('#memory svg g.memdev').length,
    devices: box(document.querySelector('#devices table')),
    deviceRows: all('#devices table:first-of-type tbody tr').length,
    candidates: box(document.querySelector('#candidates table')),
    candidateRows: all('#candidates tbody tr').length,
    measuredRows: all('#candidates tbody tr').filter(tr => {
      const i = all('#candidates thead th').findIndex(th => th.textContent == 'measured ms');
      return i >= 0 && /^[0-9.]+$/.test(tr.children[i].textContent); }).length,
    pageWidth: document.documentElement.scrollWidth,
    pageHeight: document.documentElement.scrollHeight,
    scripts: all('script').length
  });
})()"""


def render(browser, page, png_prefix):
    """Load page from disk in a fresh tab; the probe's figures and every URL it requested."""
    target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
        "sessionId"]
    browser.send("Network.enable", session=session)
    browser.send("Page.enable", session=session)
    browser.send("Emulation.setDeviceMetricsOverride",
                 {"width": 1366, "height": 768, "deviceScaleFactor": 1, "mobile": False},
                 session=session)
    url = "file://" + os.path.abspath(page)
    browser.send("Page.navigate", {"url": url}, session=session)
    browser.wait_event("Page.loadEventFired", session)
    time.sleep(0.3)  # anything the page would fetch late is asked for by now
    facts = json.loads(browser.send("Runtime.evaluate", {"expression": PROBE, "returnByValue": True},
                                    session=session)["result"]["value"])
    shot = browser.send("Page.captureScreenshot", {"format": "png"}, session=session)
    with open(png_prefix + ".png", "wb") as f:
        f.write(base64.b64decode(shot["data"]))
    full = browser.send("Page.captureScreenshot",
                        {"format": "png", "captureBeyondViewport": True,
                         "clip": {"x": 0, "y": 0, "width": 1366,
                                  "height": min(facts["pageHeight"], 6000), "scale": 1}},
                        session=session)
    with open(png_prefix + "-full.png", "wb") as f:
        f.write(base64.b64decode(full["data"]))
    urls = [e["params"]["request"]["url"] for e in browser.events
            if e.get("method") == "Network.requestWillBeSent" and e.get("sessionId") == session]
    browser.events = [e for e in browser.events if e.get("sessionId") != session]
    browser.send("Target.closeTarget", {"targetId": target})
    return facts, [u for u in urls if u != url and not u.startswith("data:")]


def run_dpc(dpc, args):
    p = subprocess.run([dpc] + args, capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


def main():
    if len(sys.argv) != 4:
        print(__doc__)
        return 2
    dpc, src, work = sys.argv[1:]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)

    # a bad path is refused, named, before any planning
    bad = os.path.join(work, "no-such-folder", "report.html")
    rc, out, err = run_dpc(dpc, ["plan", os.path.join(src, "examples/wide_mlp.graph"),
                                 "--html", bad])
    check(rc != 0 and bad in err and "does not exist" in err,
          "--html into a missing folder is refused naming it", "exit %d, stderr %r" % (rc, err))
    # and before --strategy auto searches and measures: nothing measured, nothing printed
    rc, out, err = run_dpc(dpc, ["plan", os.path.join(src, "examples/fashion_mlp.graph"),
                                 "--devices", "cpu:2", "--strategy", "auto", "--measure",
                                 "--html", "/proc/report.html"])
    check(rc == 1 and "--html '/proc/report.html'" in err and not out,
          "--html into an unwritable folder is refused before the search",
          "exit %d, stdout %r, stderr %r" % (rc, out, err))

    # the cases: (name, model, flags, devices drawn)
    cases = [
        ("auto", "wide_mlp", ["--devices", "cpu:2", "--strategy", "auto", "--explain"], 2),
        ("measure", "fashion_mlp", ["--devices", "cpu:2", "--strategy", "auto", "--explain",
                                    "--measure"], 2),
        ("pipeline", "transformer_block", ["--strategy", "pipeline", "--stages", "2", "--dp", "2",
                                           "--microbatches", "4"], 4),
        # past what Graphviz lays out in seconds: no picture, a note saying how to draw it
        ("many", "transformer_block", ["--devices", "cpu:64"], 64),
    ]
    pages = []
    for name, model, flags, ndev in cases:
        page = os.path.join(work, name + ".html")
        rc, out, err = run_dpc(dpc, ["plan", os.path.join(src, "examples", model + ".graph")] +
                               flags + ["--html", page])
        check(rc == 0 and os.path.isfile(page), "%s: dpc plan --html writes the page" % name,
              "exit %d: %s" % (rc, err.strip()))
        if rc:
            continue
        text = open(page, encoding="utf-8").read()
        check(not re.search(r"(src|href)\s*=\s*[\"'](?!#|data:)", text),
              "%s: the page names no file or URL to fetch" % name)
        # the strategies the command ranked: the lines of --explain's table
        ranked = 0
        if "--explain" in flags:
            lines = out.splitlines()
            head = [i for i, l in enumerate(lines) if l.startswith("rank ")]
            if head:
                for l in lines[head[0] + 1:]:
                    if not re.match(r"^(\d+|-)\s+\S", l):
                        break
                    ranked += 1
            check(ranked > 1, "%s: --explain ranked strategies" % name, out)
        # the strategies the command measured: "  measured STRATEGY  X ms a step, predicted ..."
        measured = len(re.findall(r"^  measured \S+ +[0-9.]+ ms a step", out, re.M))
        if "--measure" in flags:
            check(measured > 0, "%s: --measure measured strategies" % name, out)
        pages.append((name, page, ndev, ranked, measured))

    exe = find_chromium()
    if not exe:
        print("skip: no Chromium (chromium, chromium-browser or google-chrome; DPC_CHROMIUM names "
              "one) to render the pages; scripts/setup installs the Debian package chromium")
        return SKIP if not fails else 1
    with tempfile.TemporaryDirectory(prefix="dpc-chromium-") as profile:
        browser = Browser(exe, profile)
        try:
            browser.send("Target.setDiscoverTargets", {"discover": False})
            for name, page, ndev, ranked, measured in pages:
                facts, away = render(browser, page, os.path.join(work, name))
                check(not away, "%s: no request leaves the page" % name, "requested %s" % away)
                w, h = facts["placement"]
                if ndev <= 8:
                    check(w > 100 and h > 50 and facts["placementNodes"] > 0,
                          "%s: the placement picture is drawn (%dx%d, %d nodes)" %
                          (name, w, h, facts["placementNodes"]), json.dumps(facts))
                else:
                    check(w == 0 and "--dot" in facts["placementNote"],
                          "%s: too big a picture is left to --dot, saying so" % name,
                          json.dumps(facts))
                w, h = facts["timeline"]
                rows = facts["rows"]
                check(w > 600 and h > 20 * ndev and len(rows) == ndev and
                      all(n > 0 for _, n in rows),
                      "%s: the timeline has a row per device (%d), each with intervals (%s)" %
                      (name, ndev, ", ".join("%s %d" % (d, n) for d, n in rows)),
                      json.dumps(facts))
                check(facts["memory"][1] > 0 and facts["memRows"] == ndev,
                      "%s: memory bars for the %d devices" % (name, ndev), json.dumps(facts))
                check(facts["devices"][1] > 0 and facts["deviceRows"] == ndev,
                      "%s: the devices table has %d rows" % (name, ndev), json.dumps(facts))
                if ranked:
                    check(facts["candidates"][1] > 0 and facts["candidateRows"] == ranked,
                          "%s: the strategies table has the %d ranked by dpc plan" %
                          (name, ranked), json.dumps(facts))
                if measured:
                    check(facts["measuredRows"] == measured,
                          "%s: the %d measured show their measured step beside the prediction" %
                          (name, measured), json.dumps(facts))
                check(facts["pageWidth"] <= 1366,
                      "%s: the page fits 1366 pixels across (%d)" % (name, facts["pageWidth"]))
                check(facts["scripts"] == 0, "%s: the page runs no script" % name)
                print("     screenshot: %s.png (%d px tall in all)" %
                      (os.path.join(work, name), facts["pageHeight"]))
        except (TimeoutError, EOFError, RuntimeError) as e:
            check(False, "Chromium renders the pages", str(e))
        finally:
            browser.close()
    print("%s: %d failure%s" % ("FAIL" if fails else "ok", fails, "" if fails == 1 else "s"))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
