"""Garbage for a zringd's ring port (a ZeroMQ PULL socket on TCP) and its
IPC socket (a ROUTER on a Unix socket), from a stranger that speaks just
enough ZMTP 3.0 (NULL mechanism, RFC 23) to get frames through, written
here because the soak needs no ZeroMQ binding for Python.

One burst is one connection sending one of:
- raw: random bytes instead of a greeting (ZeroMQ drops the connection);
- frames: random frames and multi-frame messages of 0-300 bytes;
- headers: msgpack arrays shaped like zring messages: a ring header of a
  generation the ring does not have (membership kinds only from a node the
  ring file does not list: see _IGNORED_KINDS), another protocol
  version, an unknown type, truncated arrays (every one of them must be
  dropped and counted);
- oversized: a frame header announcing more than max_message_bytes (ZeroMQ
  closes the connection).
For the IPC socket the msgpack forms never make a well-formed hello or
submit, so a stranger cannot take a rank over.
"""

import pathlib
import re
import socket
import struct

FORMS = ("raw", "frames", "headers", "oversized")


def _greeting():
    return b"\xff" + b"\x00" * 8 + b"\x7f" + bytes([3, 0]) + b"NULL".ljust(20, b"\x00") + b"\x00" * 32


def _frame(body, more=False, command=False):
    flags = (0x01 if more else 0) | (0x04 if command else 0)
    if len(body) > 255:
        return bytes([flags | 0x02]) + struct.pack(">Q", len(body)) + body
    return bytes([flags, len(body)]) + body


def _ready(socket_type):
    name, value = b"Socket-Type", socket_type.encode()
    return _frame(b"\x05READY" + bytes([len(name)]) + name + struct.pack(">I", len(value)) + value,
                  command=True)


def _uint(v):
    if v < 128:
        return bytes([v])
    return b"\xcf" + struct.pack(">Q", v)


class _Bin(bytes):
    """Packed as msgpack bin (plain bytes are packed as str)."""


def _msgpack_array(items):
    out = bytes([0x90 | len(items)]) if len(items) < 16 else b"\xdc" + struct.pack(">H", len(items))
    for item in items:
        if isinstance(item, _Bin):
            out += b"\xc4" + bytes([len(item)]) + item
        elif isinstance(item, bytes):
            out += bytes([0xa0 | len(item)]) + item if len(item) < 32 else b"\xd9" + bytes([len(item)]) + item
        else:
            out += _uint(item)
    return out


# Ring message kinds (lib/wire/wire.hpp): data, up and abort of a generation
# the ring does not have are dropped from anyone; heartbeat, form and reform
# are acted on whatever their generation when they claim to come from a
# listed node (a heartbeat of another generation means it restarted), so
# those go out only under the index of a node the ring file does not list,
# which is dropped.
_IGNORED_KINDS = (1, 4, 6)
_MEMBERSHIP_KINDS = (2, 3, 5)
# zringd's own version (kWireVersion), read from the source so that the
# headers below reach its decoders instead of stopping at the version check.
_WIRE_VERSION = int(re.search(
    r"kWireVersion = (\d+);",
    (pathlib.Path(__file__).resolve().parents[2] / "lib/wire/wire.hpp").read_text()).group(1))


def _fake_header(rng, ipc, nodes):
    """A msgpack message shaped like zring's, never one zringd acts on."""
    choice = rng.randrange(5)
    if choice == 0 and not ipc:  # a ring header of a generation nobody has
        kind = rng.choice(_IGNORED_KINDS + _MEMBERSHIP_KINDS)
        sender = rng.randrange(nodes, nodes + 16) if kind in _MEMBERSHIP_KINDS else rng.randrange(16)
        # kind, generation, op, sender, phase, segment, chunk, hop, origin,
        # error_code, text, members, data_port, then the sender's settings:
        # nodes, local_ranks, min_nodes, chunk_bytes, gather_bytes, direct_bytes
        return _msgpack_array([_WIRE_VERSION, 2, kind, rng.getrandbits(64), rng.randrange(4), sender,
                               rng.randrange(5), 0, rng.randrange(8), rng.randrange(4),
                               rng.randrange(4), 0, b"chaos", _Bin(b""), 0,
                               rng.getrandbits(64), 1, 2, 1 << 20, 0, 0])
    if choice == 1:  # another protocol version
        version = rng.choice([v for v in range(1, 100) if v != _WIRE_VERSION])
        return _msgpack_array([version, rng.randrange(1, 5), rng.getrandbits(32)])
    if choice == 2:  # an unknown message type
        return _msgpack_array([_WIRE_VERSION, rng.randrange(6, 120), rng.getrandbits(16)])
    if choice == 3:  # an IPC message of a kind clients never send
        return _msgpack_array([_WIRE_VERSION, 4, rng.choice([2, 4, 5, 6, 10, 13, 14, 15, 99]), rng.getrandbits(16)])
    full = _msgpack_array([_WIRE_VERSION, 2, 1, rng.getrandbits(64), 0, 0, 1])  # truncated
    return full[:rng.randrange(1, len(full))]


def _messages(rng, form, ipc, nodes):
    """The bytes to send after the handshake."""
    out = b""
    for _ in range(rng.randrange(5, 40)):
        parts = rng.randrange(1, 4)
        for p in range(parts):
            if form == "headers" and p == 0:
                body = _fake_header(rng, ipc, nodes)
            else:
                body = rng.randbytes(rng.randrange(0, 300))
            out += _frame(body, more=p + 1 < parts)
    return out


def _connect(address, timeout_s):
    if address.startswith("ipc://"):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        target = address[len("ipc://"):]
    else:
        host, port = address[len("tcp://"):].rsplit(":", 1)
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        target = (host, int(port))
    s.settimeout(timeout_s)
    s.connect(target)
    return s


def burst(address, rng, nodes, form=None, timeout_s=0.5):
    """One connection of garbage to address (tcp://HOST:PORT or ipc://PATH)
    of a node of a ring file that lists `nodes` nodes.
    Returns the form sent, or None when the socket did not take it (a
    daemon that is not there, or frozen: nothing to send garbage to)."""
    ipc = address.startswith("ipc://")
    form = form or rng.choice(FORMS)
    try:
        with _connect(address, timeout_s) as s:
            if form == "raw":
                s.sendall(rng.randbytes(rng.randrange(1, 2000)))
            else:
                s.sendall(_greeting())
                s.recv(64)  # the daemon's greeting (or part of it): it is there
                s.sendall(_ready("DEALER" if ipc else "PUSH"))
                if form == "oversized":
                    s.sendall(bytes([0x02]) + struct.pack(">Q", (1 << 33) + rng.randrange(1 << 20)) + b"x" * 64)
                else:
                    s.sendall(_messages(rng, form, ipc, nodes))
            # Close only once the daemon has read it all: a close with its
            # answers unread would reset the connection under the garbage.
            try:
                s.shutdown(socket.SHUT_WR)
                while s.recv(65536):
                    pass
            except OSError:
                pass
            return form
    except OSError:
        return None
