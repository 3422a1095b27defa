"""A TCP proxy in front of a real server (an emulator) that can hold back one HTTP request and
deliver it later: what a network does when it delivers a request after its client gave up.

It runs in a process of its own: a client library that waits for the network holding the GIL
(pyarrow's GCS client does) would otherwise stop the proxy that should answer it.

Every connection is forwarded both ways, request by request (a request is read whole, by its
``Content-Length``, before it is forwarded). After ``hold(pattern)``, the first request whose
bytes contain ``pattern`` is kept, with everything its client sends after it on that
connection, and its client gets no answer. ``deliver()`` sends it to the server and returns the
server's status code.
"""

from __future__ import annotations

import multiprocessing
import re
import socket
import threading
from collections.abc import Mapping
from multiprocessing.connection import Connection
from typing import Any

_HOST = "127.0.0.1"
_ADDRESS = re.compile(r"127\.0\.0\.1:(\d+)")
_LENGTH = re.compile(rb"\r\ncontent-length:\s*(\d+)", re.IGNORECASE)
_CONTINUE = re.compile(rb"\r\nexpect:\s*100-continue", re.IGNORECASE)
#: The status line of a final answer (not "100 Continue").
_FINAL = re.compile(rb"HTTP/1\.[01] ([2-5]\d\d)")


class HoldingProxy:
    """Forwards connections to ``target_port`` (in a process of its own); holds one request
    when asked."""

    def __init__(self, target_port: int) -> None:
        context = multiprocessing.get_context("spawn")
        self._commands, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(target_port, child), daemon=True)
        self._process.start()
        assert self._commands.poll(60), "the proxy process did not start"
        self.port: int = self._commands.recv()

    def hold(self, pattern: bytes) -> None:
        """Hold back the next request containing ``pattern``."""
        self._call("hold", pattern)

    def deliver(self, timeout: float = 30) -> int:
        """Send the held request to the server now; the HTTP status it answered."""
        status: int = self._call("deliver", timeout)
        return status

    def close(self) -> None:
        self._process.kill()
        self._process.join(10)

    def _call(self, command: str, argument: Any) -> Any:
        self._commands.send((command, argument))
        assert self._commands.poll(120), f"the proxy did not answer {command}"
        failed, result = self._commands.recv()
        assert not failed, result
        return result


def _serve(target_port: int, commands: Connection) -> None:
    """The proxy process: runs the proxy, and its commands from the test."""
    proxy = _Proxy(target_port)
    commands.send(proxy.port)
    while True:
        command, argument = commands.recv()
        try:
            commands.send((False, getattr(proxy, command)(argument)))
        except AssertionError as exc:
            commands.send((True, str(exc)))


class _Proxy:
    """The proxy itself (threads in the proxy process)."""

    def __init__(self, target_port: int) -> None:
        self._target = (_HOST, target_port)
        self._listener = socket.create_server((_HOST, 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._pattern: bytes | None = None
        self._held: tuple[socket.socket, bytes] | None = None
        self._captured = threading.Event()
        self._answer = b""
        self._answered = threading.Condition(self._lock)
        threading.Thread(target=self._accept, daemon=True).start()

    def hold(self, pattern: bytes) -> None:
        """Hold back the next request containing ``pattern``."""
        with self._lock:
            self._pattern = pattern
            self._captured.clear()

    def deliver(self, timeout: float = 30) -> int:
        """Send the held request to the server now; the HTTP status it answered."""
        assert self._captured.wait(timeout), "no request matched the pattern"
        with self._lock:
            assert self._held is not None
            server, request = self._held
            self._held = None
        server.sendall(request)
        with self._answered:
            assert self._answered.wait_for(lambda: _FINAL.search(self._answer), timeout), (
                "the server did not answer the held request"
            )
            found = _FINAL.search(self._answer)
        assert found, self._answer[:200]
        return int(found.group(1))

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            try:
                server = socket.create_connection(self._target)
            except OSError:
                client.close()
                continue
            state = {"held": False}
            for forward in (self._upstream, self._downstream):
                ends = (client, server) if forward == self._upstream else (server, client)
                threading.Thread(target=forward, args=(*ends, state), daemon=True).start()

    def _upstream(
        self, client: socket.socket, server: socket.socket, state: dict[str, bool]
    ) -> None:
        pending = b""
        streaming = 0  # bytes of a body still to pass through (sent after "100 Continue")
        try:
            while chunk := client.recv(65536):
                pending += chunk
                while pending:
                    if state["held"]:
                        self._keep(pending)
                        pending = b""
                    elif streaming:
                        part, pending = pending[:streaming], pending[streaming:]
                        server.sendall(part)
                        streaming -= len(part)
                    elif (head := _head_length(pending)) is None:
                        break  # the head is not all here yet
                    elif _waits_to_continue(pending[:head]):
                        # the client sends its body only once told to continue: the head is
                        # held or goes now, and the body follows it as it comes
                        if self._matches(pending[:head]):
                            self._hold(state, server, pending[:head])
                            client.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
                        else:
                            server.sendall(pending[:head])
                            streaming = _body_length(pending[:head])
                        pending = pending[head:]
                    elif len(pending) < head + _body_length(pending[:head]):
                        break  # the body is not all here yet
                    else:
                        end = head + _body_length(pending[:head])
                        request, pending = pending[:end], pending[end:]
                        if self._matches(request):
                            self._hold(state, server, request)
                        else:
                            server.sendall(request)
        except OSError:
            pass
        finally:
            if not state["held"]:
                try:
                    server.shutdown(socket.SHUT_WR)
                except OSError:
                    pass

    def _downstream(
        self, server: socket.socket, client: socket.socket, state: dict[str, bool]
    ) -> None:
        """The server's answers go to the client; once its connection holds a request, to
        ``deliver`` (the client gave up on them)."""
        try:
            while chunk := server.recv(65536):
                if state["held"]:
                    with self._answered:
                        self._answer += chunk
                        self._answered.notify_all()
                else:
                    client.sendall(chunk)
        except OSError:
            pass

    def _matches(self, request: bytes) -> bool:
        with self._lock:
            if self._pattern is None or self._pattern not in request:
                return False
            self._pattern = None
            return True

    def _hold(self, state: dict[str, bool], server: socket.socket, request: bytes) -> None:
        state["held"] = True
        with self._lock:
            self._held = (server, request)
        self._captured.set()

    def _keep(self, data: bytes) -> None:
        with self._lock:
            if self._held is not None:
                self._held = (self._held[0], self._held[1] + data)


def _head_length(buffer: bytes) -> int | None:
    """The length of the request head at the start of ``buffer`` (None: not all here)."""
    end = buffer.find(b"\r\n\r\n")
    return None if end < 0 else end + 4


def _body_length(head: bytes) -> int:
    found = _LENGTH.search(head)
    return int(found.group(1)) if found else 0


def _waits_to_continue(head: bytes) -> bool:
    return _CONTINUE.search(head) is not None


def through_proxy(options: Mapping[str, Any]) -> tuple[HoldingProxy, dict[str, Any]]:
    """A proxy in front of the one local server ``options`` (fsspec storage options) name, and
    the options naming the proxy instead."""
    text = repr(options)
    ports = set(_ADDRESS.findall(text))
    assert len(ports) == 1, text
    proxy = HoldingProxy(int(ports.pop()))

    def rewrite(value: Any) -> Any:
        if isinstance(value, str):
            return _ADDRESS.sub(f"{_HOST}:{proxy.port}", value)
        if isinstance(value, Mapping):
            return {key: rewrite(item) for key, item in value.items()}
        return value

    return proxy, rewrite(options)
