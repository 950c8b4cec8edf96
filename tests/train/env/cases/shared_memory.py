# 300 MiB of shared memory that no process's private memory shows: KIND.
import ctypes
import mmap
import os
import time

kind, size = "KIND", 100 * 2**20
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
IPC_CREAT = 0o1000


def sysv(detach):
    shmid = libc.shmget(0, size, IPC_CREAT | 0o600)
    addr = libc.shmat(shmid, None, 0)
    ctypes.memset(addr, 1, size)
    if detach:  # the segment lives on, attached to no process
        libc.shmdt(ctypes.c_void_p(addr))


children = []
for _ in range(3):
    if kind == "sysv_detached":
        sysv(detach=True)
        continue
    pid = os.fork()
    if pid == 0:
        if kind == "sysv_attached":
            sysv(detach=False)
        else:  # shared anonymous memory, a third in each child
            m = mmap.mmap(-1, size, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
            chunk = b"x" * 2**20  # filled a MiB at a time: nothing private the size of it
            for offset in range(0, size, len(chunk)):
                m[offset:offset + len(chunk)] = chunk
        time.sleep(60)
        os._exit(0)
    children.append(pid)
time.sleep(60)
