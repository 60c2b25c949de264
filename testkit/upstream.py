"""The one stub upstream of the Python tests: an in-process HTTP/1.1 server on 127.0.0.1 built on the
shared case recorder's request handler (tests/cases/recorder.py, imported, not copied).

Every request goes through the recorder's handler first, so it is logged exactly as the recorder
logs it (one JSON line in `log`: method, path, headers, body_sha256, body_len) *before* anything is
answered, and the recorder's answer is computed (a JSON-RPC result for a request, an array of them
for a batch, else 202 with no body). The stub then sends either that answer, byte for byte, or a
`Canned` response chosen by request path (`route`) or by a `responder(seen)` function; a route or
responder returning None falls back to the recorder's answer. With no routes and no responder the
stub *is* the recorder (`Stack.recorder()`).

Every request is also kept in memory as a `Seen` (method, path, headers in their original order and
case, body bytes, arrival time), for tests that read what the upstream received.
"""

from __future__ import annotations

import importlib.util
import io
import json
import tempfile
import threading
import time
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

from testkit.paths import CASES_DIR
from testkit.processes import HOST

RECORDER = CASES_DIR / "recorder.py"


def _load_recorder():
    spec = importlib.util.spec_from_file_location("cases_recorder", RECORDER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


recorder = _load_recorder()


@dataclass
class Canned:
    """One canned HTTP response, sent `delay` s after the request arrived: `chunks` (chunked transfer
    encoding, `chunk_delay` s apart) if given, else `body` with a content-length. `status=None`: no
    answer at all, the connection is closed after `delay` s (a server that hangs). `cut`: the
    connection is closed after the chunks, without the last chunk (a reply reset before its end)."""

    status: int | None = 200
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    chunks: list[bytes] | None = None
    chunk_delay: float = 0.0
    delay: float = 0.0
    cut: bool = False


@dataclass
class Seen:
    """A request as the stub received it (chunked bodies decoded)."""

    method: str
    path: str
    header_list: list[tuple[str, str]]
    body: bytes
    at: float

    @property
    def headers(self) -> dict[str, str]:
        return {k.lower(): v for k, v in self.header_list}

    def has_header(self, name: str) -> bool:
        return any(k.lower() == name.lower() for k, _ in self.header_list)


Responder = Callable[[Seen], "Canned | None"]


class StubUpstream:
    """The stub on a port of its own (`port`, `url`); see the module doc. Stop it with `close()`
    (or use it as a context manager)."""

    def __init__(self, log: Path | str | None = None, responder: Responder | None = None) -> None:
        self._own_log = log is None
        if log is None:
            fd, name = tempfile.mkstemp(prefix="stub-upstream-", suffix=".jsonl")
            io.open(fd).close()
            log = name
        self.log = Path(log)
        self.routes: dict[str, Canned | Responder] = {}
        self.responder = responder
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        stub = self

        class Handler(recorder.make_handler(str(self.log))):
            def _handle(self) -> None:
                body = self._body()
                seen = Seen(self.command, self.path, list(self.headers.items()), body, time.monotonic())
                with stub._lock:
                    stub.seen.append(seen)
                answer = self._recorded(body)
                canned = stub._canned(seen)
                if canned is None:
                    self.wfile.write(answer)
                else:
                    self._send(canned)
                self.wfile.flush()

            def _recorded(self, body: bytes) -> bytes:
                """Run the recorder's own handler on `body`: it logs the request and renders its
                answer, which is captured (status line, headers, body) instead of sent."""
                real, self.wfile = self.wfile, io.BytesIO()
                self._body = lambda: body
                try:
                    super()._handle()
                    return self.wfile.getvalue()
                finally:
                    self.wfile = real
                    del self._body

            def _send(self, canned: Canned) -> None:
                if canned.delay:
                    time.sleep(canned.delay)
                if canned.status is None:
                    self.close_connection = True
                    return
                self.send_response(canned.status)
                for k, v in canned.headers:
                    self.send_header(k, v)
                if canned.chunks is not None:
                    self.send_header("transfer-encoding", "chunked")
                    self.end_headers()
                    for i, chunk in enumerate(canned.chunks):
                        if i and canned.chunk_delay:
                            time.sleep(canned.chunk_delay)
                        if chunk:
                            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                            self.wfile.flush()
                    if canned.cut:
                        self.close_connection = True
                        return
                    self.wfile.write(b"0\r\n\r\n")
                else:
                    self.send_header("content-length", str(len(canned.body)))
                    self.end_headers()
                    self.wfile.write(canned.body)

            do_POST = do_GET = do_DELETE = do_PUT = do_PATCH = _handle

        self._server = ThreadingHTTPServer((HOST, 0), Handler)
        self._server.daemon_threads = True
        self.port: int = self._server.server_port
        self._thread = threading.Thread(target=self._server.serve_forever, name="stub-upstream", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def _canned(self, seen: Seen) -> Canned | None:
        with self._lock:
            canned = self.routes.get(seen.path.split("?")[0], self.responder)
        return canned(seen) if callable(canned) else canned

    def route(self, path: str, canned: Canned | Responder) -> str:
        """Serve `canned` on `path` (or what `canned(request)` returns; None: the recorder's answer);
        returns `path`."""
        with self._lock:
            self.routes[path] = canned
        return path

    def requests(self, path: str | None = None) -> list[Seen]:
        with self._lock:
            return [s for s in self.seen if path is None or s.path == path]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._own_log:
            self.log.unlink(missing_ok=True)

    stop = close

    def __enter__(self) -> "StubUpstream":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ------------------------------------------------------------------------------------ canned bodies


def compact(obj: Any) -> bytes:
    """The filter's re-serialisation of a parsed message: compact, members in order, UTF-8 as is.

    Equal to the filter's bytes for documents without floats or control characters other than
    \\n \\r \\t (the only ones the canned data uses)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def json_canned(obj_or_bytes: Any, status: int = 200, extra: list[tuple[str, str]] | None = None) -> Canned:
    body = obj_or_bytes if isinstance(obj_or_bytes, bytes) else compact(obj_or_bytes)
    return Canned(status, [("content-type", "application/json")] + (extra or []), body)


def sse_canned(stream: bytes, *, pieces: int = 1, chunk_delay: float = 0.0, status: int = 200,
               cut: bool = False) -> Canned:
    """`stream` as a chunked text/event-stream response, split into `pieces` roughly equal chunks
    (`cut`: reset before its end, `Canned`)."""
    step = max(1, -(-len(stream) // pieces))
    chunks = [stream[i:i + step] for i in range(0, len(stream), step)]
    return Canned(status, [("content-type", "text/event-stream"), ("cache-control", "no-cache")],
                  chunks=chunks, chunk_delay=chunk_delay, cut=cut)


def rpc_request(seen: Seen) -> dict | None:
    """The JSON-RPC request (a single object with `id` and `method`) a stub received, else None."""
    try:
        msg = json.loads(seen.body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return msg if isinstance(msg, dict) and "id" in msg and "method" in msg else None


# -------------------------------------------------------------------------------------- the recorder's log


def recorder_lines(log: Path, settle: float = 0.0) -> list[dict[str, Any]]:
    """The recorder's log entries so far (none if it has not written the file yet). `settle`
    seconds are waited first, for a request Envoy might still be forwarding after a local reply;
    after a forwarded reply no wait is needed (the recorder logs before it answers)."""
    if settle:
        time.sleep(settle)
    try:
        text = Path(log).read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def recorder_reply(id_: Any) -> bytes:
    """The exact bytes tests/cases/recorder.py answers a JSON-RPC request with id `id_`."""
    return json.dumps({"jsonrpc": "2.0", "id": id_, "result": {"content": [{"type": "text", "text": "ok"}]}}).encode()
