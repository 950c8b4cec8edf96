# Shared tail of every hostile solution (the test puts it first): submit the first answers file
# found, else the sample submission, and report what was tried.
import json as _json
import shutil as _shutil

def _submit(found, tried):
    target = "submission/submission.csv"
    if found:
        _shutil.copy(found[0], target)
    else:
        _shutil.copy("input/sample_submission.csv", target)
    print("HOSTILE", _json.dumps({"found": [str(f) for f in found], "tried": tried}), flush=True)
