chunk = b"x" * 2**20
with open("big.bin", "wb") as fh:
    for _ in range(100_000):
        fh.write(chunk)
