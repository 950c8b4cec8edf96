# A submission built to make the grader slow or large: WIDE_KIND.
kind = "WIDE_KIND"
with open("submission/submission.csv", "w") as fh:
    if kind == "identical_columns":  # 100,000 copies of one name: pandas took over a minute
        fh.write("id," + ",".join(["target"] * 100_000) + "\n")
    elif kind == "million_columns":
        fh.write("id," + ",".join(f"c{i}" for i in range(1_000_000)) + "\n")
    elif kind == "long_fields":
        fh.write("id,target\n" + "".join(f"{i},{'x' * 20_000}\n" for i in range(4)))
print("HOSTILE", _json.dumps({"found": [], "tried": [kind]}), flush=True)
