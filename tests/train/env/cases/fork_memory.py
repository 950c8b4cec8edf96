# Three forked children hold 150 MiB each: under a 256 MiB node limit no one process is over,
# their tree is.
import os
import time

children = []
for _ in range(3):
    pid = os.fork()
    if pid == 0:
        hoard = b"x" * (150 * 2**20)  # bytes filled in: every page touched
        time.sleep(60)
        os._exit(0)
    children.append(pid)
for pid in children:
    os.waitpid(pid, 0)
