"""The byte counter behind `bytes_sent`, on real loopback TCP sockets (no ranks needed)."""

from __future__ import annotations

import os
import socket
import time

from app.verify.engine.probes.sockets import GlooSockets


def _pair() -> tuple[socket.socket, socket.socket, socket.socket]:
    server = socket.socket()
    # A tiny receive buffer on the reader, which never reads: what the writer writes
    # past it stays in the writer's send queue, written but not transmitted.
    server.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    writer = socket.socket()
    writer.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
    writer.connect(server.getsockname())
    reader, _ = server.accept()
    return server, writer, reader


def _counted(sock: socket.socket) -> int:
    counted = GlooSockets._bytes_sent(sock.fileno(), os.fstat(sock.fileno()).st_ino)
    assert counted is not None
    return counted


def test_bytes_count_once_written_though_the_kernel_still_holds_them_back() -> None:
    server, writer, reader = _pair()
    try:
        writer.setblocking(False)
        written = 0
        chunk = b"x" * 65536
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                written += writer.send(chunk)
            except BlockingIOError:  # the send queue is full too
                break
        assert time.monotonic() < deadline
        info = writer.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 232)
        notsent = int.from_bytes(info[144:148], "little")
        transmitted = int.from_bytes(info[200:208], "little")
        # The reader's window is full: most of it was written but never went out...
        assert notsent > 0 and transmitted < written
        # ...and every written byte counts, each once.
        assert _counted(writer) == written
    finally:
        for s in (writer, reader, server):
            s.close()


def test_a_descriptor_reused_by_another_socket_is_not_read_as_the_old_one() -> None:
    server, writer, reader = _pair()
    try:
        fd, ino = writer.fileno(), os.fstat(writer.fileno()).st_ino
        assert GlooSockets._bytes_sent(fd, ino + 1) is None
        assert GlooSockets._bytes_sent(fd, ino) == 0
    finally:
        for s in (writer, reader, server):
            s.close()
