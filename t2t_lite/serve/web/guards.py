"""`RequestGuard`, the ASGI middleware in front of every route of `t2t-serve`. Before any route
runs, it refuses in JSON

- a Host header that is not one of the server's names (400): a web page on another site cannot
  reach the server through a DNS name of its own that resolves to 127.0.0.1 (DNS rebinding).
  The names: localhost, 127.0.0.1 and [::1], the address it is bound to, and `--allowed_hosts`;
  `*` allows any. (Starlette's TrustedHostMiddleware makes the same check but answers in plain
  text.)
- a Content-Length that is not a number of bytes (400; uvicorn refuses most such headers itself,
  with its own plain-text 400, before the application sees the request);
- a body beyond `max_body_size` (413): a Content-Length beyond it at once, and any body, chunked
  or not, as soon as the bytes read pass it; the rest is not read. The body is read whole, up to
  the limit, before a route parses it. (FastAPI's own `max_body_size` answers a Content-Length
  beyond it in plain text.)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable

from t2t_lite.serve.web.api import too_large

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")

ErrorBody = Callable[[str, str, str], dict]  # (path, field, message) --> the JSON error body


def host_name(host: str) -> str:
    """A Host header or --allowed_hosts name without its port and IPv6 brackets, lower case."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class RequestGuard:
    """Serves a request whose Host is in `hosts` (names, as `host_name` reads them; `*`: any)
    and whose body is at most `max_body_size` bytes; refuses others with `error_body`'s JSON."""

    def __init__(self, app, hosts: Iterable[str], max_body_size: int, error_body: ErrorBody):
        self.app, self.error_body, self.max_body_size = app, error_body, max_body_size
        self.hosts = {host_name(h) for h in hosts}

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        refused = self._refused(scope)
        if refused is not None:
            return await self._answer(send, scope["path"], *refused)
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return None
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_body_size:
                message = too_large(scope["path"], self.max_body_size)
                return await self._answer(send, scope["path"], 413, "body", message)
            more = message.get("more_body", False)
        replayed = False

        async def replay():
            nonlocal replayed
            if replayed:  # after the body: what the server says next (a disconnect)
                return await receive()
            replayed = True
            return {"type": "http.request", "body": b"".join(chunks), "more_body": False}

        return await self.app(scope, replay, send)

    def _refused(self, scope) -> tuple[int, str, str] | None:
        """(status, field, message) of a request refused on its headers, else None."""
        headers = {k.lower(): v.decode("latin-1") for k, v in scope.get("headers", ())}
        host, length = headers.get(b"host", ""), headers.get(b"content-length")
        if "*" not in self.hosts and host_name(host) not in self.hosts:
            allowed = ", ".join(sorted(self.hosts))
            message = (
                f"Host: {host!r} is not one of this server's names ({allowed}); start "
                "t2t-serve with --allowed_hosts=NAME to serve it under another name"
            )
            return 400, "Host", message
        if length is not None and not length.strip().isdigit():
            return 400, "Content-Length", f"Content-Length: {length!r} is not a number"
        if length is not None and int(length) > self.max_body_size:
            return 413, "body", too_large(scope["path"], self.max_body_size)
        return None

    async def _answer(self, send, path: str, status: int, field: str, message: str) -> None:
        content = json.dumps(self.error_body(path, field, message)).encode("utf-8")
        headers = [(b"content-type", b"application/json"),
                   (b"content-length", str(len(content)).encode())]  # fmt: skip
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": content})
