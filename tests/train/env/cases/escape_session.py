# Detaches a child into its own session (out of our process group), then exits 0.
import os
import time

if os.fork() == 0:
    os.setsid()
    time.sleep(300)
    os._exit(0)
print("parent done")
