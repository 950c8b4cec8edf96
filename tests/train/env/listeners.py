"""Sockets the host listens on, for attacks that try to reach them from a node."""
from __future__ import annotations

import contextlib
import os
import shutil
import socket
import sys
import tempfile
from pathlib import Path

import pytest

#: Where a host socket is bound: three directories, or none (abstract, TCP on 127.0.0.1).
KINDS = ["/tmp", "/var/tmp", "elsewhere", "abstract", "tcp"]


def elsewhere() -> str:
    """A host directory outside the fallback's private ones that the test may write: /run as
    root, else the one that holds the venv; never the home."""
    return "/run" if os.geteuid() == 0 else str(Path(sys.prefix).parent)


@contextlib.contextmanager
def host_listener(kind: str, token: str):
    """(a listening, non-blocking socket of the host, its address as ["unix", path or "\\0name"]
    or ["inet", [host, port]]). A socket bound to a path has mode 777 in a directory of mode
    755: any uid may connect. The host's own connection is made and accepted first (the control)."""
    where = None
    if kind == "abstract":
        listener, address = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM), ["unix", f"\0{token}"]
        listener.bind(address[1])
    elif kind == "tcp":
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        address = ["inet", list(listener.getsockname())]
    else:
        where = Path(tempfile.mkdtemp(prefix=f"{token}-", dir=elsewhere() if kind == "elsewhere" else kind))
        os.chmod(where, 0o755)
        listener, address = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM), ["unix", str(where / "sock")]
        listener.bind(address[1])
        os.chmod(address[1], 0o777)
    try:
        listener.listen(4)
        listener.setblocking(False)
        with socket.socket(listener.family, socket.SOCK_STREAM) as control:
            control.connect(listener.getsockname())
        listener.accept()[0].close()
        yield listener, address
    finally:
        listener.close()
        if where is not None:
            shutil.rmtree(where, ignore_errors=True)


def nothing_arrived(listener: socket.socket) -> None:
    with pytest.raises(BlockingIOError):
        listener.accept()
