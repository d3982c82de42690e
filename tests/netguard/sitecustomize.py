"""Network guard for the fresh-machine test: Konkord may reach loopback and unix sockets only.

Put this directory on PYTHONPATH and name a log file in KONKORD_NETGUARD_LOG. Every Python
process then imports this module at start-up, but only a program named `konkord` (sys.argv[0]
ends with "konkord") and the processes it starts are guarded, so pip can still reach PyPI in the
same shell command. A guarded process records each attempt to reach a non-loopback address (one
JSON line: the call, the address, the pid) and gets an OSError instead of a connection, so the
attempt is both refused and visible to the test, even when the caller swallows the error (as
litellm does when it fails to fetch its cost map).

Why not a network namespace or a firewall: neither needs to be available on a fresh machine or a
CI runner, and pip in the same command must keep its network.
"""

from __future__ import annotations

import os
import sys

LOG_ENV = "KONKORD_NETGUARD_LOG"
INHERIT_ENV = "KONKORD_NETGUARD_ACTIVE"


def _guarded_program() -> bool:
    """True for `konkord` itself and, through an inherited variable, for its children."""
    if not os.environ.get(LOG_ENV):
        return False
    if os.environ.get(INHERIT_ENV) == "1":
        return True
    argv0 = sys.argv[0] if sys.argv else ""
    return os.path.basename(argv0).endswith("konkord")


def _install() -> None:
    """Wrap the socket entry points every HTTP client goes through (sync and asyncio)."""
    import ipaddress
    import json
    import socket

    log_path = os.environ[LOG_ENV]
    os.environ[INHERIT_ENV] = "1"  # subprocesses of konkord (render workers...) are guarded too

    def local_host(host: object) -> bool:
        if host is None:
            return True  # a passive lookup for bind(), not a destination
        if isinstance(host, bytes):
            host = host.decode("ascii", "replace")
        if not isinstance(host, str):
            return False
        name = host.strip("[]").split("%", 1)[0].lower()
        if name in ("", "localhost", "localhost.localdomain", "ip6-localhost"):
            return True
        if name.endswith(".localhost"):
            return True
        try:
            return ipaddress.ip_address(name).is_loopback
        except ValueError:
            return False

    def local_address(family: int, address: object) -> bool:
        if family == getattr(socket, "AF_UNIX", object()) or isinstance(address, (str, bytes)):
            return True  # unix socket path or abstract name
        if isinstance(address, tuple) and address:
            return local_host(address[0])
        return False

    def refuse(call: str, address: object) -> OSError:
        record = {
            "call": call,
            "address": repr(address),
            "pid": os.getpid(),
            "argv": list(sys.argv),
        }
        try:
            with open(log_path, "a", encoding="utf-8") as log:
                log.write(json.dumps(record) + "\n")
        except OSError:
            pass  # the exception below still refuses the connection
        return ConnectionRefusedError(
            f"netguard: outbound network access blocked in this test ({call} {address!r})"
        )

    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    real_sendto = socket.socket.sendto
    real_getaddrinfo = socket.getaddrinfo
    real_create_connection = socket.create_connection

    def connect(self: socket.socket, address: object) -> None:
        if not local_address(self.family, address):
            raise refuse("connect", address)
        real_connect(self, address)  # type: ignore[arg-type]

    def connect_ex(self: socket.socket, address: object) -> int:
        if not local_address(self.family, address):
            raise refuse("connect_ex", address)
        return real_connect_ex(self, address)  # type: ignore[arg-type]

    def sendto(self: socket.socket, data: bytes, *args: object) -> int:
        address = args[-1]
        if not local_address(self.family, address):
            raise refuse("sendto", address)
        return real_sendto(self, data, *args)  # type: ignore[call-overload,no-any-return]

    def getaddrinfo(host: object, *args: object, **kwargs: object) -> object:
        if not local_host(host):
            raise refuse("getaddrinfo", host)
        return real_getaddrinfo(host, *args, **kwargs)  # type: ignore[arg-type]

    def create_connection(address: object, *args: object, **kwargs: object) -> socket.socket:
        if not (isinstance(address, tuple) and local_host(address[0])):
            raise refuse("create_connection", address)
        return real_create_connection(address, *args, **kwargs)  # type: ignore[arg-type]

    socket.socket.connect = connect  # type: ignore[method-assign,assignment]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign,assignment]
    socket.socket.sendto = sendto  # type: ignore[method-assign,assignment]
    socket.getaddrinfo = getaddrinfo  # type: ignore[assignment]
    socket.create_connection = create_connection  # type: ignore[assignment]


if _guarded_program():
    _install()
