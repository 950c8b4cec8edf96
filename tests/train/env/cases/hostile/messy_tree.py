# Leave a tree the trainer's cleanup must remove: 3,000 nested directories (a path far past
# PATH_MAX), names a terminal or a shell would misread, directories without permissions, a
# FIFO, a socket, links out of the workspace; then submit honestly.
import os
import socket

fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
for _ in range(3000):
    os.mkdir("d", dir_fd=fd)
    child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
    os.close(fd)
    fd = child
os.mkfifo("fifo", dir_fd=fd)
os.close(fd)
for name in ("line\nbreak", "-rf", "[bold red]", "\x1b[31mred", "..."):
    os.makedirs(os.path.join("odd", name, "x"))
os.mkdir(b"odd/\xff\xfe")
os.makedirs("locked/inner")
open("locked/inner/f", "w").close()
os.chmod("locked/inner", 0)
os.chmod("locked", 0)
os.mkfifo("fifo")
with socket.socket(socket.AF_UNIX) as s:
    s.bind("sock")
os.symlink("/", "root-link")
os.symlink("/etc/passwd", "passwd-link")
_submit([], ["messy_tree"])
