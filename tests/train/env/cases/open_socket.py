# Tries to reach a server the test runs on the host's loopback (port filled in by the test).
import socket

with socket.create_connection(("127.0.0.1", PORT), timeout=2) as conn:
    conn.sendall(b"leak")
