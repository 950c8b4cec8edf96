"""Running the dashboard: in the foreground (`warehouse serve`) or on a background thread
(tests, notebooks), both through uvicorn on a socket bound before it starts."""
from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

from warehouse.errors import TerminalError
from warehouse.serve.lake import close_pools


def check_warehouse(url: str) -> None:
    """Fail before serving when the file is missing or not at the newest schema."""
    from warehouse.serve.data import reading

    with reading(url):
        pass


def bind(host: str, port: int) -> socket.socket:
    """The listening socket (port 0: any free port); a taken port is one clear error. It
    listens at once, so the address printed (or yielded) is never refused."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(1024)  # connections queue from now on, before uvicorn has started
    except OSError as exc:
        sock.close()
        raise TerminalError(f"cannot listen on {host}:{port} ({exc.strerror}). "
                            "Pick another with --port.") from None
    return sock


def _server(url: str, refresh_s: float):
    import uvicorn

    from warehouse.serve.app import create_app

    config = uvicorn.Config(create_app(url, refresh_s), log_level="warning", access_log=False,
                            lifespan="off")
    return uvicorn.Server(config)


def serve(url: str, host: str, port: int, refresh_s: float, log=print) -> None:
    """Serve until Ctrl-C."""
    check_warehouse(url)
    sock = bind(host, port)
    shown = f"[{host}]" if ":" in host else host
    log(f"Serving {url} at http://{shown}:{sock.getsockname()[1]}/ (read-only; Ctrl-C stops)")
    try:
        _server(url, refresh_s).run(sockets=[sock])
    finally:
        close_pools()


@contextlib.contextmanager
def background(url: str, host: str = "127.0.0.1", port: int = 0,
               refresh_s: float = 5.0) -> Iterator[str]:
    """The dashboard on a thread; yields its base URL, stops it on exit."""
    sock = bind(host, port)
    server = _server(url, refresh_s)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("the dashboard server stopped while starting")
        time.sleep(0.02)
    try:
        yield f"http://{host}:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
        close_pools()
