"""pip's effective configuration, handed to uv in uv's own terms.

uv reads none of pip's configuration. A user sets up pip once (a config file or PIP_*
variables: a company CA bundle, a mirror, a proxy, local wheel folders); a replay that
builds its venv with uv must reach the same places, or it fails where pip works (in a
fresh login shell with no SSL_CERT_FILE exported, uv's TLS handshake with the default index
fails "UnknownIssuer" while pip, whose config names the bundle, installs).

`pip config list` is the source: it prints every file's settings and the PIP_* variables
(`:env:.key`), so pip's own precedence (file < environment) decides, not a copy of it here.

pip setting            uv
index-url              --index-url
extra-index-url        --extra-index-url (a missing file:// index is skipped, as pip does)
find-links             --find-links (a missing folder is skipped)
cert                   SSL_CERT_FILE (SSL_CERT_DIR for a folder)
client-cert            SSL_CLIENT_CERT
trusted-host           --allow-insecure-host
proxy                  HTTPS_PROXY and HTTP_PROXY
timeout                UV_HTTP_TIMEOUT
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

SECTIONS = ("global", "install", ":env:")  # pip's order of precedence, the last wins
DEFAULT_INDEX = "https://pypi.org/simple"
USED = ("index-url", "extra-index-url", "find-links", "cert", "client-cert", "trusted-host", "proxy", "timeout")


@dataclass(frozen=True)
class PipSettings:
    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    cert: str | None = None
    client_cert: str | None = None
    trusted_hosts: tuple[str, ...] = ()
    proxy: str | None = None
    timeout: str | None = None
    origin: dict = field(default_factory=dict)  # setting -> where pip took it from (a section or PIP_ variable)


def parse(listing: str) -> PipSettings:
    """The settings of a `pip config list` output (`section.key='value'` lines)."""
    values: dict[str, tuple[str, str]] = {}
    rank = {s: i for i, s in enumerate(SECTIONS)}
    seen: dict[str, int] = {}
    for line in listing.splitlines():
        m = re.match(r"^(.*?)\.([\w-]+)='(.*)'$", line)
        if not m or m.group(1) not in rank:
            continue
        section, key, value = m.groups()
        where = "PIP_" + key.upper().replace("-", "_") if section == ":env:" else f"pip config {section}"
        key = {"default-timeout": "timeout"}.get(key, key)
        if key in USED and rank[section] >= seen.get(key, -1):
            seen[key] = rank[section]
            values[key] = (value, where)
    many = lambda k: tuple(dict.fromkeys(values[k][0].split())) if k in values else ()  # noqa: E731
    one = lambda k: values[k][0] if k in values else None  # noqa: E731
    return PipSettings(index_url=one("index-url"), extra_index_urls=many("extra-index-url"),
                       find_links=many("find-links"), cert=one("cert"), client_cert=one("client-cert"),
                       trusted_hosts=many("trusted-host"), proxy=one("proxy"), timeout=one("timeout"),
                       origin={k: v[1] for k, v in values.items()})


@functools.lru_cache(maxsize=1)
def read() -> PipSettings:
    """This machine's pip settings (pip's files and the PIP_* variables of this process)."""
    out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    return parse(out)


def _local(url: str) -> bool:
    return Path(url.removeprefix("file://")).exists()


def uv_args(s: PipSettings) -> list[str]:
    """uv pip options for pip's indexes, wheel folders and trusted hosts."""
    args: list[str] = []
    for link in s.find_links:
        if _local(link) or "://" in link and not link.startswith("file://"):
            args += ["--find-links", link]
    if s.index_url:
        args += ["--index-url", s.index_url]
    for url in s.extra_index_urls:
        if not url.startswith("file://") or _local(url):
            args += ["--extra-index-url", url]  # pip skips a missing local index with a warning; uv would fail
    for host in s.trusted_hosts:
        args += ["--allow-insecure-host", host]
    # pip takes the best version across all indexes; uv's default stops at the first index that has the name
    return args + ["--index-strategy", "unsafe-best-match"]


def uv_env(s: PipSettings, base: dict | None = None) -> dict:
    """The environment for uv: `base` (default: this process's) plus pip's certificate, proxy and timeout."""
    env = dict(os.environ if base is None else base)
    if s.cert:
        env["SSL_CERT_DIR" if Path(s.cert).is_dir() else "SSL_CERT_FILE"] = s.cert
    if s.client_cert:
        env["SSL_CLIENT_CERT"] = s.client_cert
    if s.proxy:
        env.setdefault("HTTPS_PROXY", s.proxy)
        env.setdefault("HTTP_PROXY", s.proxy)
    if s.timeout:
        env["UV_HTTP_TIMEOUT"] = str(int(float(s.timeout)))
    return env


def describe(s: PipSettings) -> dict:
    """What a replay record keeps: the sources uv was given and where pip took each from."""
    out = {"index": s.index_url or DEFAULT_INDEX, "extra_indexes": list(s.extra_index_urls),
           "find_links": list(s.find_links), "cert": s.cert, "client_cert": s.client_cert,
           "trusted_hosts": list(s.trusted_hosts), "proxy": s.proxy, "timeout": s.timeout}
    return {k: v for k, v in out.items() if v} | {"from": dict(s.origin)}


def one_line(described: dict) -> str:
    """A `describe()` dict as one line: 'index URL, 2 extra indexes, find-links DIR, cert FILE (from PIP_CERT)'."""
    parts = [f"index {described.get('index', DEFAULT_INDEX)}"]
    parts += [f"extra index {u}" for u in described.get("extra_indexes", [])]
    parts += [f"find-links {u}" for u in described.get("find_links", [])]
    parts += [f"{k.replace('_', ' ')} {described[k]}" for k in ("cert", "client_cert", "proxy", "timeout") if described.get(k)]
    parts += [f"trusted host {h}" for h in described.get("trusted_hosts", [])]
    origin = described.get("from") or {}
    return ", ".join(parts) + (f" (from {', '.join(sorted(set(origin.values())))})" if origin else "")


def unreachable(stderr: str, s: PipSettings) -> str | None:
    """One line when uv failed to reach an index: which index, why, and what pip would use here."""
    m = re.search(r"error sending request for url \((\S+?)\)", stderr)
    if not m:
        return None
    causes = re.findall(r"cause: (.+)", stderr)
    pip_uses = (f"index {s.index_url or DEFAULT_INDEX}"
                + (f", certificate bundle {s.cert}" if s.cert else ", the system certificates")
                + (f", proxy {s.proxy}" if s.proxy else "")
                + (f", trusted hosts {', '.join(s.trusted_hosts)}" if s.trusted_hosts else ""))
    return (f"uv could not reach {m.group(1)} ({causes[-1].strip() if causes else 'no answer'}); pip here would use "
            f"{pip_uses} (uv was given the same): check that `pip download --no-deps` reaches it from this shell, "
            "else set pip's cert/proxy (`pip config set global.cert FILE`)")


def main(argv: list[str]) -> int:
    """`python -m repro.envs.pipconf [uv pip install ARGS]`: uv's install with pip's settings here (the Makefile's
    venvs: `make install` and `make xla-env`). It imports only the standard library (and repro.redaction, which
    does too), so it runs from the checkout (PYTHONPATH=src) before repro is installed; uv comes from this
    interpreter (`python -m uv`). What it shows of pip's settings is redacted; uv is given the real ones."""
    s = read()
    if not argv or argv[0] in ("-h", "--help"):
        from repro.redaction import redact  # standard library only, as this module: a mirror's password is data

        usage = redact("usage: python -m repro.envs.pipconf ARGS...  (runs `uv pip install ARGS` with pip's indexes, "
                       "wheel folders, certificate, proxy and timeout: " + one_line(describe(s)) + ")")
        if argv:
            print(usage)
            return 0
        print("repro.envs.pipconf: nothing to install: give uv pip install's arguments\n" + usage, file=sys.stderr)
        return 2
    return subprocess.call([sys.executable, "-m", "uv", "pip", "install", *uv_args(s), *argv], env=uv_env(s))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
