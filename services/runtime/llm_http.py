"""The model client's plain HTTP path: POST /chat/completions on a kept-alive `http.client`
connection, for an endpoint the SDK's request machinery adds nothing to (issue 34).

Against the scripted server, one process, CPU per call warm (`thread_time`, p50 of 300, three
rounds): the SDK's request path (`sdk.post`) 0.69-0.78 ms, httpx alone 0.46-0.51 ms,
`http.client` 0.13-0.19 ms; a forked effector runs its calls cold, at two to three times that.
What stays the SDK's (DESIGN §10: one client module over the openai SDK): the configuration
(base URL, key, default headers, time-out), the typed errors — a non-2xx reply becomes exactly
the exception the SDK raises for it, a failed connection `APIConnectionError`, a time-out
`APITimeoutError` — and every endpoint this path does not take: one reached through a proxy
(HTTP(S)_PROXY / ALL_PROXY, minus NO_PROXY, as httpx reads them), a scheme other than http(s),
or any with ARTOO_LLM_TRANSPORT=sdk.

Each thread keeps its own connection (the SDK's pool is shared; here a thread's calls follow one
another anyway), made anew after a fork and whenever the server has closed it: a kept-alive
connection is checked for EOF before it is reused (as httpcore does), and a request that could
not even be written to a reused connection is written once more to a fresh one. Once a request
is sent, a failure is the caller's: the client's own retries, with their backoff and budget.
"""
from __future__ import annotations

import http.client
import json
import os
import select
import ssl
import threading
import urllib.request
from urllib.parse import urlsplit

import openai

try:
    import httpx2 as httpx  # the HTTP client this openai build uses (for its error types)
except ImportError:  # pragma: no cover - an openai build on plain httpx
    import httpx

_GONE = (ConnectionResetError, BrokenPipeError)   # a write to a connection already closed


def eligible(base_url: str, transport: str = "auto") -> bool:
    """Whether calls to `base_url` may take this path (else the SDK's)."""
    if transport == "sdk":
        return False
    url = urlsplit(base_url)
    if url.scheme not in ("http", "https") or not url.hostname:
        return False
    proxies = urllib.request.getproxies_environment()
    if proxies.get(url.scheme) or proxies.get("all"):
        return bool(urllib.request.proxy_bypass_environment(url.hostname, proxies))
    return True


class PlainEndpoint:
    """One endpoint's chat completions over `http.client`, with the SDK's headers and errors."""

    def __init__(self, sdk: "openai.OpenAI", timeout_s: float):
        base = str(sdk.base_url).rstrip("/")
        url = urlsplit(base)
        self.sdk = sdk
        self.https = url.scheme == "https"
        self.host = url.hostname or ""
        self.port = url.port or (443 if self.https else 80)
        self.prefix = url.path.rstrip("/")
        self.base = base
        self.timeout_s = timeout_s
        self.headers = {k: v for k, v in {**sdk.default_headers, **sdk.auth_headers}.items()
                        if isinstance(v, str)}       # the SDK's, minus its unset (Omit) ones
        self._tls = ssl.create_default_context() if self.https else None
        self._local = threading.local()

    # -- connections ------------------------------------------------------------------------------
    def _connection(self) -> tuple[http.client.HTTPConnection, bool]:
        """This thread's connection and whether it is new (not yet used for a request)."""
        local = self._local
        conn = getattr(local, "conn", None)
        if conn is not None and (local.pid != os.getpid() or _closed(conn)):
            if local.pid == os.getpid():
                conn.close()
            conn = None                  # a parent's socket is the parent's: never touched
        if conn is not None:
            return conn, False
        if self.https:
            conn = http.client.HTTPSConnection(self.host, self.port, timeout=self.timeout_s,
                                               context=self._tls)
        else:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout_s)
        local.conn, local.pid = conn, os.getpid()
        return conn, True

    def _drop(self, conn: http.client.HTTPConnection) -> None:
        conn.close()
        if getattr(self._local, "conn", None) is conn:
            self._local.conn = None

    def _request(self, method: str, path: str) -> "httpx.Request":
        return httpx.Request(method, self.base + path)

    # -- calls --------------------------------------------------------------------------------
    def call(self, method: str, path: str, body: dict | None = None,
             headers: dict | None = None, timeout_s: float | None = None) -> bytes:
        """The reply body of one request (`path` below the base URL, e.g. "/chat/completions");
        raises the SDK's exception for anything but a 2xx. `timeout_s`: this request's bound on
        connecting and on each read, instead of the endpoint's (a spare's warm-up waits 2 s)."""
        data = json.dumps(body).encode() if body is not None else None
        sent = {**self.headers, **(headers or {})}
        for attempt in (0, 1):
            conn, fresh = self._connection()
            _bound(conn, timeout_s or self.timeout_s)
            try:
                conn.request(method, self.prefix + path, body=data, headers=sent)
            except _GONE as exc:
                self._drop(conn)
                if attempt == 0 and not fresh:
                    continue             # closed before it had our request: send it afresh
                raise self._failed(method, path, exc) from exc
            except (OSError, http.client.HTTPException) as exc:
                self._drop(conn)
                raise self._failed(method, path, exc) from exc
            try:                         # sent: from here a failure is the caller's to retry
                reply = conn.getresponse()
                content = reply.read()
            except (OSError, http.client.HTTPException) as exc:
                self._drop(conn)
                raise self._failed(method, path, exc) from exc
            if reply.will_close:
                self._drop(conn)
            if 200 <= reply.status < 300:
                return content
            response = httpx.Response(reply.status, headers=reply.getheaders(), content=content,
                                      request=self._request(method, path))
            raise self.sdk._make_status_error_from_response(response)
        raise AssertionError("unreachable")  # pragma: no cover

    def _failed(self, method: str, path: str, exc: BaseException) -> openai.APIError:
        """The SDK's exception for a request that got no reply."""
        if isinstance(exc, TimeoutError):
            return openai.APITimeoutError(request=self._request(method, path))
        return openai.APIConnectionError(message=f"Connection error: {exc}",
                                         request=self._request(method, path))


def _bound(conn: http.client.HTTPConnection, timeout_s: float) -> None:
    """Time-out of the connection's next connect and of each read on it."""
    conn.timeout = timeout_s
    if conn.sock is not None:
        conn.sock.settimeout(timeout_s)


def _closed(conn: http.client.HTTPConnection) -> bool:
    """A kept-alive connection the server has closed (or sent something unasked on): its socket
    reads as ready while no request is outstanding."""
    sock = conn.sock
    if sock is None:
        return False                     # not connected yet: request() connects it
    try:
        ready, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(ready)
