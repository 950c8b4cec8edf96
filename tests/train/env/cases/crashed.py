raise ValueError("bad feature")
