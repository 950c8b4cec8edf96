# Three 60 MiB files: each under the per-file limit, together over the workspace's quota.
import time

chunk = b"x" * 2**20
for i in range(3):
    with open(f"part{i}.bin", "wb") as fh:
        for _ in range(60):
            fh.write(chunk)
time.sleep(60)
