hoard = []
while True:
    hoard.append(bytearray(64 * 2**20))
