"""Bytes on the wire: the kernel's per-socket TCP_INFO counters on gloo's own sockets.

No torch here: gloo's sockets are found in the rank's descriptor table, and the
kernel, not gloo, says what each one has sent.
"""

from __future__ import annotations

import os
import socket
import stat
import struct
import threading
import time

# struct tcp_info: tcpi_bytes_sent and tcpi_bytes_retrans are u64s at offsets 200 and 208
# (Linux 4.19+). Sent counts a retransmitted segment again; loopback drops packets when
# many runs share it, so the retransmitted bytes are taken off. tcpi_notsent_bytes (a u32 at
# 144) is what gloo has written that the kernel still holds back (Nagle's algorithm waits
# for an ACK before a small segment, a busy machine defers the send): those bytes are sent
# as far as gloo is concerned, and a rank may finish a collective before the kernel
# transmits its last small message. Counted once they are written, they belong to the
# collective that wrote them, not to the next one (a 64-byte all-reduce once read 0).
_TCPI_NOTSENT_BYTES = 144
_TCPI_BYTES_SENT = 200
_TCPI_BYTES_RETRANS = 208
_TCP_INFO_LEN = 232


class GlooSockets:
    """Bytes this rank has sent on TCP sockets other than the rendezvous store's (gloo's pairs).

    Reads the kernel's per-socket counter (TCP_INFO) on the live file descriptors
    without duplicating them: holding a duplicate would keep a socket open after
    gloo closes it and hide a peer's disappearance. The descriptor table is
    rescanned at most every RESCAN_S (gloo opens sockets only when a group forms),
    so that a tight loop of collectives does not rescan it on every reading.
    """

    RESCAN_S = 0.05

    def __init__(self, store_port: int) -> None:
        self._store_port = store_port
        self._gloo: dict[int, int] = {}  # fd -> inode
        self._scanned_at = -1.0
        self._lock = threading.Lock()

    def total(self) -> int:
        with self._lock:
            if time.monotonic() - self._scanned_at > self.RESCAN_S:
                self._rescan()
            total = 0
            for fd, ino in list(self._gloo.items()):
                sent = self._bytes_sent(fd, ino)
                if sent is None:
                    del self._gloo[fd]
                    self._scanned_at = -1.0
                else:
                    total += sent
            return total

    def invalidate(self) -> None:
        with self._lock:
            self._scanned_at = -1.0

    def _rescan(self) -> None:
        self._scanned_at = time.monotonic()
        try:
            names = os.listdir("/proc/self/fd")
        except OSError:
            return
        found: dict[int, int] = {}
        for name in names:
            fd = int(name)
            try:
                st = os.fstat(fd)
            except OSError:
                continue
            if not stat.S_ISSOCK(st.st_mode):
                continue
            if self._gloo.get(fd) == st.st_ino or self._is_gloo(fd):
                found[fd] = st.st_ino
        self._gloo = found

    def _is_gloo(self, fd: int) -> bool:
        try:
            sock = socket.socket(fileno=fd)
        except OSError:
            return False
        try:
            if sock.family not in (socket.AF_INET, socket.AF_INET6) or sock.type != socket.SOCK_STREAM:
                return False
            local, peer = sock.getsockname()[1], sock.getpeername()[1]
        except OSError:  # listening or not connected
            return False
        finally:
            sock.detach()
        return self._store_port not in (local, peer)

    @staticmethod
    def _bytes_sent(fd: int, ino: int) -> int | None:
        """The data bytes written to the socket, each once: tcpi_bytes_sent less
        tcpi_bytes_retrans, plus tcpi_notsent_bytes. None if `fd` no longer is that socket."""
        try:
            if os.fstat(fd).st_ino != ino:
                return None
            sock = socket.socket(fileno=fd)
        except OSError:
            return None
        try:
            info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO_LEN)
        except OSError:
            return None
        finally:
            sock.detach()
        if len(info) < _TCPI_BYTES_RETRANS + 8:
            return 0
        sent, retrans = struct.unpack_from("QQ", info, _TCPI_BYTES_SENT)
        (notsent,) = struct.unpack_from("I", info, _TCPI_NOTSENT_BYTES)
        return int(sent - retrans + notsent)
