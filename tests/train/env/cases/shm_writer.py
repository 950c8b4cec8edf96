# 200 MiB into /dev/shm and 100 MiB into /tmp: files on the node's tmpfs mounts are memory,
# in no process's resident set.
import time

chunk = b"x" * 2**20
for path, mib in (("/dev/shm/hoard", 200), ("/tmp/hoard", 100)):
    with open(path, "wb") as fh:
        for _ in range(mib):
            fh.write(chunk)
time.sleep(60)
