# Connect to a socket the host listens on: a Unix socket bound to a path (TARGET_PATH), an
# abstract Unix socket (TARGET_ABSTRACT) or TCP on 127.0.0.1 (TARGET_PORT), whichever the test
# filled in, and report whether the connection was made.
import socket

tried, reached, errors = [], [], {}
targets = []
if "TARGET_PATH" != "-":
    targets.append((socket.AF_UNIX, "TARGET_PATH"))
if "TARGET_ABSTRACT" != "-":
    targets.append((socket.AF_UNIX, "\0TARGET_ABSTRACT"))
if "TARGET_PORT" != "-":
    targets.append((socket.AF_INET, ("127.0.0.1", int("TARGET_PORT"))))
for family, address in targets:
    tried.append(repr(address))
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(5)
    try:
        s.connect(address)
        s.sendall(b"a node was here\n")
        reached.append(repr(address))
    except OSError as exc:
        errors[repr(address)] = type(exc).__name__ + ": " + str(exc)
    finally:
        s.close()
print("SOCKETS", {"reached": reached, "errors": errors}, flush=True)
_submit([], tried)
