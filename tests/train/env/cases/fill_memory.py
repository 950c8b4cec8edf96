import time

hoard = []
try:
    while True:
        hoard.append(bytearray(64 * 2**20))
except MemoryError:
    time.sleep(1.0)  # held at the limit a while: the meter samples every Limits.sample_s
    raise
