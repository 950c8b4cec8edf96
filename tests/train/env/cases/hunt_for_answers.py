# Walks every directory it can see and tries known paths (filled in by the test), looking for
# planted private answers, the warehouse file and a checkpoint directory. Prints what it found.
import json
import os
import time

PLANTED = json.loads('PLANTED_JSON')
TOKEN = "TOKEN_VALUE"
found = []
# the allow-list's view is small and must be walked to the end (a long deadline, so a loaded
# machine cannot cut it short); the deny-list fallback shows the whole machine (a short one)
deadline, complete = time.monotonic() + DEADLINE_S, True
for top, dirs, files in os.walk("/", onerror=lambda e: None):
    if time.monotonic() > deadline:
        complete = False
        break
    if top in ("/proc", "/sys", "/dev"):
        dirs[:] = []
        continue
    found += [os.path.join(top, name) for name in dirs + files if TOKEN in os.path.join(top, name)]
readable = []
for path in PLANTED:
    try:
        with open(path, "rb") as fh:
            fh.read(1)
        readable.append(path)
    except OSError:
        if os.path.isdir(path) and os.access(path, os.R_OK):
            readable.append(path)
print("FOUND", json.dumps(found))
print("COMPLETE", json.dumps(complete))
print("READABLE", json.dumps(readable))
print("INPUT", json.dumps(sorted(os.listdir("input"))))
