# 180 MiB into a file it deleted first: gone from the workspace's listing, still on the disk.
import os
import time

fh = open("hidden.bin", "wb")
os.unlink("hidden.bin")
chunk = b"x" * 2**20
for _ in range(180):
    fh.write(chunk)
fh.flush()
time.sleep(60)
