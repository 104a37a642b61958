"""The raw HTTP/1.1 transport: one keep-alive socket per worker, responses read in the callback.

Why: aiohttp runs about six Python calls per HTTP chunk (and vLLM sends one chunk per token), which
is most of a streaming client's CPU. Here a worker owns one keep-alive socket; a read takes
everything the socket has, de-chunks it in one loop and hands it to `SSEReader.feed` in one call.
HTTP/1.1 only (chunked, Content-Length or until-close bodies), TLS via asyncio, no proxies.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
import urllib.parse
from dataclasses import dataclass

from tuning.measure.loadgen.sse import SSEReader


class StaleConnection(ConnectionError):
    """A reused keep-alive socket closed before any byte of the response: safe to resend once."""


@dataclass(frozen=True)
class Target:
    """Where a URL's requests go, parsed once per run: socket address, TLS, path, Host header."""

    host: str
    port: int
    tls: bool
    path: str
    host_header: str

    @classmethod
    def parse(cls, url: str) -> Target:
        parts = urllib.parse.urlsplit(url)
        tls = parts.scheme == "https"
        host = parts.hostname or "127.0.0.1"
        port = parts.port or (443 if tls else 80)
        shown = f"[{host}]" if ":" in host else host
        header = shown if port == (443 if tls else 80) else f"{shown}:{port}"
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        return cls(host=host, port=port, tls=tls, path=path, host_header=header)

    def post_head(self, api_key: str | None) -> bytes:
        """A streaming POST's head up to the Content-Length value, which each request appends."""
        head = (
            f"POST {self.path} HTTP/1.1\r\nHost: {self.host_header}\r\n"
            "User-Agent: vllm-tuning-lab\r\nAccept: text/event-stream\r\n"
            "Content-Type: application/json\r\n"
        )
        if api_key:
            head += f"Authorization: Bearer {api_key}\r\n"
        return (head + "Content-Length: ").encode("latin-1")


class RawConnection(asyncio.Protocol):
    """One keep-alive socket that reads its responses inside `data_received`.

    The event loop calls `data_received` with whatever the socket had; the head is parsed, the
    body de-chunked and handed to the request's `SSEReader` right there, stamped with the callback's
    own clock reading. The waiting task is woken once, when the response is complete, instead of
    once per read: on a stream of small token chunks that wake-up is most of a client's cost.
    """

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.sse: SSEReader | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.head = b""
        self.body: Body | None = None
        self.status = 0
        self.reason = ""
        self.error_body = b""
        self.received = False
        self.usable = False

    @classmethod
    async def open(cls, target: Target) -> RawConnection:
        loop = asyncio.get_running_loop()
        context = ssl.create_default_context() if target.tls else None
        _, proto = await loop.create_connection(
            cls,
            target.host,
            target.port,
            ssl=context,
            server_hostname=target.host if context is not None else None,
        )
        return proto

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.usable = True
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass

    def request(self, data: bytes, sse: SSEReader) -> asyncio.Future[None]:
        """Send one request; the future resolves when its response has been read (or fails)."""
        if not self.usable or self.transport is None or self.transport.is_closing():
            raise StaleConnection("the connection is closed")
        self.sse = sse
        self.head = b""
        self.body = None
        self.status = 0
        self.error_body = b""
        self.received = False
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(data)
        return self.waiter

    def data_received(self, data: bytes) -> None:
        t = time.perf_counter()
        sse = self.sse
        if sse is None:  # bytes nobody asked for: the socket cannot be trusted any more
            self.close()
            return
        self.received = True
        try:
            body = self.body
            if body is None:
                data = self._read_head(data)
                body = self.body
                if body is None:
                    return
            if not data and not body.complete:
                return
            payload = body.feed(data) if data else b""
            if self.status != 200:
                self.error_body += payload
                if body.complete or len(self.error_body) >= 4096:
                    sse.http_error(self.status, self.reason, self.error_body)
                    self._done(keep=False)
                return
            if payload and not sse.feed(payload, t):
                self._done(keep=False)  # stopped mid-stream: the socket is not reusable
            elif body.complete:
                self._done(keep=body.keep_alive and not body.leftover)
        except Exception as exc:  # a malformed response fails this request, not the loop
            self._fail(exc)

    def _read_head(self, data: bytes) -> bytes:
        """Collect the head; once whole, set status and framing and return the body bytes."""
        buf = self.head + data
        while True:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > 65536:
                    raise ConnectionError("response head larger than 64 KiB")
                self.head = buf
                return b""
            lines = buf[:end].decode("latin-1").split("\r\n")
            rest = buf[end + 4 :]
            parts = lines[0].split(" ", 2)
            try:
                status = int(parts[1])
            except (IndexError, ValueError):
                raise ConnectionError(f"not an HTTP response: {lines[0][:80]!r}") from None
            if 100 <= status < 200:
                buf = rest  # an interim response; the real one follows
                continue
            headers: dict[str, str] = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            self.head = b""
            self.status = status
            self.reason = parts[2] if len(parts) > 2 else ""
            self.body = Body.of(parts[0], headers)
            assert self.sse is not None
            self.sse.rec.http_status = status
            return rest

    def _done(self, keep: bool) -> None:
        self.sse = None
        if not keep:
            self.close()
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _fail(self, exc: BaseException) -> None:
        self.sse = None
        self.close()
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)

    def eof_received(self) -> bool:
        self._ended(None)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.usable = False
        self._ended(exc)

    def _ended(self, exc: Exception | None) -> None:
        """The server closed the socket: the end of an until-close body, or a failure."""
        self.usable = False
        if self.sse is None:
            return
        if not self.received:
            self._fail(StaleConnection("connection closed before the response"))
            return
        body = self.body
        if body is not None and body.mode == "close" and exc is None:
            body.complete = True
            if self.status != 200:
                self.sse.http_error(self.status, self.reason, self.error_body)
            self._done(keep=False)
            return
        self._fail(
            ConnectionError(
                "the connection closed inside the response" + (f": {exc}" if exc else "")
            )
        )

    def close(self) -> None:
        self.usable = False
        self.sse = None
        if self.transport is not None:
            self.transport.close()


class Body:
    """How a response body ends: chunked, Content-Length, or the server closing the socket."""

    __slots__ = ("mode", "left", "crlf", "trailer", "complete", "buf", "leftover", "keep_alive")

    def __init__(self, mode: str, length: int, keep_alive: bool) -> None:
        self.mode = mode  # "chunked" | "length" | "close"
        self.left = length  # bytes left in the current chunk, or of the whole body
        self.crlf = False  # a chunk's data is done, its CRLF is next
        self.trailer = False  # past the last (zero-size) chunk
        self.complete = mode == "length" and length == 0
        self.buf = b""
        self.leftover = b""
        self.keep_alive = keep_alive and mode != "close"

    @classmethod
    def of(cls, version: str, headers: dict[str, str]) -> Body:
        connection = headers.get("connection", "").lower()
        keep = version.upper() == "HTTP/1.1" and "close" not in connection
        if "chunked" in headers.get("transfer-encoding", "").lower():
            return cls("chunked", 0, keep)
        if "content-length" in headers:
            try:
                return cls("length", int(headers["content-length"]), keep)
            except ValueError:
                raise ConnectionError("invalid Content-Length") from None
        return cls("close", 0, False)

    def feed(self, data: bytes) -> bytes:
        """Raw bytes in, body bytes out; sets `complete` at the end of the body."""
        if self.mode == "chunked":
            return self._chunked(data)
        if self.mode == "length":
            if len(data) >= self.left:
                body, self.leftover = data[: self.left], data[self.left :]
                self.left = 0
                self.complete = True
                return body
            self.left -= len(data)
            return data
        return data

    def _chunked(self, data: bytes) -> bytes:
        if self.buf:
            data = self.buf + data
            self.buf = b""
        elif not (self.left or self.crlf or self.trailer):
            # Fastest path: the read is exactly one whole chunk, as each token's event arrives
            # from a server that keeps up with its client: its size line, then exactly that many
            # bytes and a CRLF (a payload holding a CRLF still parses right: its size says so).
            eol = data.find(b"\r\n", 0, 18)
            if eol > 0:
                try:
                    end = eol + 2 + int(data[:eol], 16)
                except ValueError:
                    end = -1
                if end > eol + 2 and len(data) == end + 2 and data.endswith(b"\r\n"):
                    return data[eol + 2 : end]
        if not (self.left or self.crlf or self.trailer) and data.endswith(b"\r\n"):
            # Fast path: the read is whole chunks, perhaps ending with the last (zero-size) chunk
            # and no trailers, as a short response arrives in one read. Split on CRLF and check
            # every declared size against its piece: a payload holding a CRLF can never pass (its
            # own declared size is longer than the piece before the CRLF), so a pass is a correct
            # parse, and the five bytes after it are the last chunk.
            last = data.endswith(b"\r\n0\r\n\r\n") or data == b"0\r\n\r\n"
            parts = (data[:-5] if last else data).split(b"\r\n")
            if len(parts) % 2:
                pieces = parts[1:-1:2]
                try:
                    sizes = [int(h, 16) for h in parts[0:-1:2]]
                except ValueError:
                    sizes = [-1]
                if 0 not in sizes and sizes == list(map(len, pieces)) and (sizes or last):
                    self.complete = last
                    return pieces[0] if len(pieces) == 1 else b"".join(pieces)
        out: list[bytes] = []
        pos = 0
        n = len(data)
        while pos < n:
            left = self.left
            if left:
                if n - pos >= left:
                    out.append(data[pos : pos + left])
                    pos += left
                    self.left = 0
                    self.crlf = True
                else:
                    out.append(data[pos:])
                    self.left = left - (n - pos)
                    pos = n
                continue
            if self.crlf:
                if n - pos < 2:
                    self.buf = data[pos:]
                    break
                if not data.startswith(b"\r\n", pos):
                    raise ConnectionError("malformed chunked body (no CRLF after a chunk)")
                pos += 2
                self.crlf = False
                continue
            eol = data.find(b"\r\n", pos)
            if eol < 0:
                self.buf = data[pos:]
                if len(self.buf) > 4096:
                    raise ConnectionError("malformed chunked body (chunk header too long)")
                break
            if self.trailer:
                if eol == pos:  # the blank line that ends the trailers: the body is done
                    self.complete = True
                    self.leftover = data[pos + 2 :]
                    break
                pos = eol + 2
                continue
            try:
                size = int(data[pos:eol], 16)
            except ValueError:
                try:
                    size = int(data[pos:eol].split(b";", 1)[0], 16)  # chunk extensions
                except ValueError:
                    raise ConnectionError("malformed chunk size") from None
            pos = eol + 2
            if size == 0:
                self.trailer = True
                continue
            if pos + size + 2 <= n and data.startswith(b"\r\n", pos + size):
                out.append(data[pos : pos + size])  # the common case: a whole chunk
                pos += size + 2
                continue
            self.left = size
        if len(out) == 1:
            return out[0]
        return b"".join(out)


# A worker's own state: its keep-alive connection, None until opened or after a failure.
Slot = list[RawConnection | None]


async def send(slot: Slot, target: Target, request: bytes, sse: SSEReader) -> None:
    """Send one request on the worker's socket (opened when there is none) and read the response
    into `sse`. A reused socket the server closed while idle is replaced and the request sent once
    more; a socket that cannot carry the next request is dropped."""
    for attempt in (0, 1):
        conn = slot[0]
        reused = conn is not None and conn.usable
        if conn is None or not reused:
            drop(slot)
            conn = await RawConnection.open(target)
            slot[0] = conn
        try:
            await conn.request(request, sse)
        except StaleConnection:
            drop(slot)
            if reused and attempt == 0:
                continue  # the server had closed the idle keep-alive socket: send it again
            raise
        if not conn.usable:
            drop(slot)
        return


def drop(slot: Slot) -> None:
    """Close and forget a worker's connection (after an error, a close, or the run)."""
    conn = slot[0]
    if conn is not None:
        conn.close()
        slot[0] = None
