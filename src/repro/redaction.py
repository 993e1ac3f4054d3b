"""Credentials out of everything repro writes or prints; the real values stay with the run.

A tracking URI, a package index, a proxy or a git remote may carry a password or a token
(`http://bob:PASS@host`, `https://tok@host`, `?token=...&X-Amz-Signature=...`). The ledger is
git-tracked and meant to be published, so the few writers where text leaves the process call
`redact` (text) or `redact_data` (a record, an entry): the ledger's append, the MLflow hand-over's
files, the terminal's streams (console.guard_streams), the report writers. Inside the process the
config keeps the real value; `restore` gives a redacted URI read back from the ledger its real
value again where this process knows it (it redacted it, or it is MLFLOW_TRACKING_URI, or its
parent handed it over in REAL_URIS_VAR), so the MLflow client still connects with the real
credentials.

What is masked, as pip, uv and MLflow mask it: a URL's whole userinfo (`user:pass@`, a bare
`token@`) becomes `***@`; a query or fragment parameter whose name says secret (token,
access_token, sig, signature, password, key, X-Amz-Signature, ...) keeps its name, its value
becomes `***`; a scheme-less `user:pass@host` (a proxy as curl takes it) becomes `***@host`;
the value of an environment variable whose name says secret (TOKEN, KEY, PASSWORD, ...) becomes
`***` wherever it appears.
"""

from __future__ import annotations

import json
import os
import re

MASK = "***"
REAL_URIS_VAR = "REPRO_REAL_URIS"  # a JSON list of real URIs a parent hands its helper process (the projector)
SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSW|CREDENTIAL|AUTH|PRIVATE|COOKIE|SESSION", re.I)
_SECRET_PARAM = re.compile(r"token|secret|passw|pwd|key|sig|credential|auth|session|cookie|private", re.I)
_URL = re.compile(r"(?<![\w+.-])([a-zA-Z][a-zA-Z0-9+.-]*://)([^\s'\"<>`|\\]+)")
# user:pass@host without a scheme (HTTPS_PROXY=user:pass@proxy:3128); a scheme's own `//` never matches
_BARE_USERINFO = re.compile(r"(?<![\w/@:.%+-])[^\s:/@'\"=,;()\[\]{}<>]+:[^\s@/'\"()\[\]{}<>]+@(?=[\w\[])")
_PARAM = re.compile(r"([?&#;])([^=&#;\s]+)=([^&#;\s]*)")
_MIN_SECRET_VALUE = 6  # shorter values of secret-named variables ("1", "true") are not secrets to hunt
_seen: dict[str, str] = {}  # redacted URL -> the real one, for `restore` in this process


def is_secret(name: str) -> bool:
    """Whether an environment variable's name says it holds a secret (its value is never recorded)."""
    return bool(SECRET_NAME.search(name))


def _url(m: re.Match) -> str:
    scheme, rest = m.group(1), m.group(2)
    cut = min((i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
    authority, tail = rest[:cut], rest[cut:]
    if "@" in authority:
        authority = MASK + "@" + authority.rsplit("@", 1)[1]
    tail = _PARAM.sub(lambda p: f"{p.group(1)}{p.group(2)}={MASK}" if _SECRET_PARAM.search(p.group(2))
                      and p.group(3) and p.group(3) != MASK else p.group(0), tail)
    out = scheme + authority + tail
    if out != m.group(0):
        _seen[out] = m.group(0)
    return out


class _Scrubber:
    """The values of this environment's secret-named variables, found once per environment."""

    def __init__(self, environ) -> None:
        values = sorted({v for k, v in environ.items() if is_secret(k) and len(v) >= _MIN_SECRET_VALUE}, key=len,
                        reverse=True)
        self.values = re.compile("|".join(map(re.escape, values))) if values else None

    def __call__(self, text: str) -> str:
        if "://" in text:
            text = _URL.sub(_url, text)
        if "@" in text:
            text = _BARE_USERINFO.sub(MASK + "@", text)
        if self.values is not None:
            text = self.values.sub(MASK, text)
        return text


_scrubbers: dict[frozenset, _Scrubber] = {}
_own: list = [None, None]  # this process's environment as last seen (its raw dict), and its scrubber


def _scrubber(environ=None) -> _Scrubber:
    if environ is None:  # every line printed comes here: a dict comparison, not a walk over the variables
        raw = getattr(os.environ, "_data", None)
        if raw is None or raw != _own[0]:
            _own[:] = [dict(raw) if raw is not None else None, _Scrubber(os.environ)]
        return _own[1]
    key = frozenset((k, v) for k, v in environ.items() if is_secret(k))
    if key not in _scrubbers:
        if len(_scrubbers) > 8:
            _scrubbers.clear()
        _scrubbers[key] = _Scrubber(environ)
    return _scrubbers[key]


def redact(text: str, environ=None) -> str:
    """`text` with every credential in it masked (see the module's docstring)."""
    return _scrubber(environ)(text) if isinstance(text, str) and text else text


def redact_data(data, environ=None):
    """A copy of `data` (dicts, lists, strings, keys included) with every string redacted; other
    values as they are. Credential-free data comes back equal to what went in."""
    scrub = _scrubber(environ)

    def walk(x):
        if isinstance(x, str):
            return scrub(x) if x else x
        if isinstance(x, dict):
            return {walk(k): walk(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return type(x)(walk(v) for v in x)
        return x

    return walk(data)


def known_real() -> list[str]:
    """The real URIs this process redacted, to hand to a helper process in REAL_URIS_VAR."""
    return sorted(set(_seen.values()))


def forget() -> None:
    """Forget the real URIs this process redacted (the MLflow writer, between two commands' drains)."""
    _seen.clear()


def restore(uri: str) -> str:
    """The real URI behind a redacted one, where this process knows it (it redacted it; it is
    MLFLOW_TRACKING_URI; a parent handed it in REAL_URIS_VAR); else the URI without its masked
    userinfo, so that MLflow's own credentials (MLFLOW_TRACKING_USERNAME/PASSWORD) apply."""
    if not isinstance(uri, str) or MASK not in uri:
        return uri
    if uri in _seen:
        return _seen[uri]
    try:
        handed = json.loads(os.environ.get(REAL_URIS_VAR) or "[]")
    except ValueError:
        handed = []
    for real in [*handed, os.environ.get("MLFLOW_TRACKING_URI") or ""]:
        if real and isinstance(real, str) and _URL.sub(_url, real) == uri:
            return real
    return uri.replace(MASK + "@", "", 1)
