"""A stand-in rate limit service that answers every call the way a test sets (`RlsStub.answer`):
an HTTP/2 server (h2) on 127.0.0.1, for the answers the real mcp-ratelimit never gives (malformed
gRPC bodies, statuses in trailers, answers later than the filter's timeout). It records every
request (headers and body) it received, and answers Envoy's gRPC health checks SERVING."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from dataclasses import dataclass, field

import h2.config
import h2.connection
import h2.events
import h2.exceptions

from testkit.rls import SilentServer

# RateLimitResponse{overall_code: OK}; also HealthCheckResponse{status: SERVING}
OK_MESSAGE = b"\x08\x01"
HEALTH_CHECK = "/grpc.health.v1.Health/Check"


def frame(message: bytes, flag: int = 0) -> bytes:
    """`message` behind the 5-byte gRPC frame header."""
    return struct.pack(">BI", flag, len(message)) + message


@dataclass
class Answer:
    """What the stub sends: `headers` (a `grpc-status` here with no body is a trailers-only
    answer), then `body` (if any), then `trailers` (if any), after `delay` seconds; with `stall`,
    the headers first and the rest `stall` seconds later."""

    headers: list[tuple[str, str]] = field(default_factory=lambda: [(":status", "200"),
                                                                    ("content-type", "application/grpc")])
    body: bytes = b""
    trailers: list[tuple[str, str]] | None = None
    delay: float = 0.0
    stall: float = 0.0


def ok() -> Answer:
    return Answer(body=frame(OK_MESSAGE), trailers=[("grpc-status", "0")])


def trailers_only(status: int) -> Answer:
    return Answer(headers=[(":status", "200"), ("content-type", "application/grpc"), ("grpc-status", str(status))])


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes


class RlsStub(SilentServer):
    """Serves `answer` (changeable while it runs) to every request; `received` lists them."""

    def __init__(self, answer: Answer | None = None):
        self.answer = answer or ok()
        self.received: list[Received] = []
        super().__init__()

    def _accepted(self, c: socket.socket):
        threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c: socket.socket):
        # Header values go out exactly as a test sets them (h2 would strip the whitespace around
        # a value such as `grpc-status: " 14"`, which Envoy reads as 14).
        config = h2.config.H2Configuration(client_side=False, header_encoding="utf-8",
                                           validate_outbound_headers=False, normalize_outbound_headers=False)
        conn = h2.connection.H2Connection(config)
        lock = threading.Lock()
        conn.initiate_connection()
        streams: dict[int, tuple[dict[str, str], bytearray]] = {}
        try:
            c.sendall(conn.data_to_send())
            while data := c.recv(65536):
                with lock:
                    for ev in conn.receive_data(data):
                        if isinstance(ev, h2.events.RequestReceived):
                            streams[ev.stream_id] = (dict(ev.headers), bytearray())
                        elif isinstance(ev, h2.events.DataReceived):
                            streams[ev.stream_id][1].extend(ev.data)
                            conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                        elif isinstance(ev, h2.events.StreamEnded):
                            headers, body = streams.pop(ev.stream_id)
                            if headers.get(":path") == HEALTH_CHECK:
                                # Envoy's active health check (envoy/envoy-cluster.yaml): always SERVING.
                                self._respond(c, conn, None, ev.stream_id, ok())
                                continue
                            self.received.append(Received(headers, bytes(body)))
                            threading.Thread(target=self._respond, args=(c, conn, lock, ev.stream_id, self.answer),
                                             daemon=True).start()
                    c.sendall(conn.data_to_send())
        except (OSError, h2.exceptions.ProtocolError):
            pass

    @staticmethod
    def _respond(c: socket.socket, conn, lock: threading.Lock | None, stream_id: int, a: Answer):
        def send(write) -> bool:
            with lock or contextlib.nullcontext():
                try:
                    write()
                    c.sendall(conn.data_to_send())
                    return True
                except (OSError, h2.exceptions.H2Error):
                    return False  # the caller gave up (reset the stream) or closed the connection

        def rest():
            # In frames h2 may send (Envoy's windows, 256 MiB by default, take any body here).
            step = conn.max_outbound_frame_size
            for at in range(0, len(a.body), step):
                last = at + step >= len(a.body)
                conn.send_data(stream_id, a.body[at:at + step], end_stream=last and a.trailers is None)
            if a.trailers is not None:
                conn.send_headers(stream_id, a.trailers, end_stream=True)

        def whole():
            conn.send_headers(stream_id, a.headers, end_stream=ends)
            rest()

        time.sleep(a.delay)
        ends = not a.body and a.trailers is None
        if not a.stall:
            send(whole)
            return
        # The lock is not held while stalling: the connection's other streams go on.
        if send(lambda: conn.send_headers(stream_id, a.headers, end_stream=ends)) and not ends:
            time.sleep(a.stall)
            send(rest)
