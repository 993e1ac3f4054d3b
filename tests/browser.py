"""Headless Chromium (Debian's `chromium`) driven over the DevTools protocol, for UI tests.

`--dump-dom` and `--screenshot` alone cannot click (MLflow's runs table folds child runs
under their parent), so the page is driven through the DevTools websocket with aiohttp
(already installed as an MLflow dependency): navigate, wait for text, run a line of JS,
take a screenshot.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import aiohttp

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1600,1000")


def chromium_binary() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Page:
    """One browser tab: `await page.open(url)`, `wait_text`, `js`, `screenshot`."""

    def __init__(self, ws):
        self.ws, self._id = ws, 0

    async def send(self, method: str, **params):
        self._id += 1
        await self.ws.send_str(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            msg = json.loads((await self.ws.receive()).data)
            if msg.get("id") == self._id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg["result"]

    async def js(self, expression: str):
        result = await self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        return result["result"].get("value")

    async def open(self, url: str) -> None:
        await self.send("Page.navigate", url=url)

    async def wait_text(self, *needles: str, timeout: float = 60) -> str:
        """The page's visible text once it holds every needle (AssertionError naming the missing)."""
        deadline = time.time() + timeout
        text = ""
        while time.time() < deadline:
            text = await self.js("document.body ? document.body.innerText : ''") or ""
            if all(n in text for n in needles):
                return text
            await asyncio.sleep(0.5)
        missing = [n for n in needles if n not in text]
        raise AssertionError(f"page never showed {missing}; it shows: {text[:1500]!r}")

    async def dom(self) -> str:
        return await self.js("document.documentElement.outerHTML")

    async def screenshot(self, path: Path) -> None:
        data = (await self.send("Page.captureScreenshot", format="png"))["data"]
        path.write_bytes(base64.b64decode(data))


class Chromium:
    """`async with Chromium() as page:` a fresh headless browser (own profile) and one tab."""

    async def __aenter__(self) -> Page:
        self.profile = tempfile.mkdtemp(prefix="repro-chromium-")
        binary = chromium_binary()
        if not binary:
            raise RuntimeError("chromium not found: `make test` installs Debian's chromium (apt-get install chromium)")
        self.proc = subprocess.Popen([binary, *FLAGS, f"--user-data-dir={self.profile}", "--remote-debugging-port=0",
                                      "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        active = Path(self.profile) / "DevToolsActivePort"  # its first line: the port chromium chose
        deadline = time.time() + 60
        while not (active.exists() and active.read_text().strip()):
            if self.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"chromium did not open its DevTools port (exit code {self.proc.poll()})")
            time.sleep(0.2)
        port = active.read_text().split()[0]
        targets = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10).read())
        url = next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")
        self.http = aiohttp.ClientSession()
        page = Page(await self.http.ws_connect(url, max_msg_size=0))
        await page.send("Page.enable")
        await page.send("Emulation.setDeviceMetricsOverride", width=1600, height=1000, deviceScaleFactor=1, mobile=False)
        return page

    async def __aexit__(self, *exc) -> None:
        await self.http.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)
