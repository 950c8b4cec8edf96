# Point the grader at a perfect submission on the host, which the node itself cannot read:
# its submission/ or submission.csv replaced by a link (or a chain of links) there, or left as
# something the trainer must not open (a FIFO would block a reader, a hard link is not its own).
import os

variant, target = "VARIANT_NAME", "/tmp/TOKEN"
if variant == "dir_link":
    os.rmdir("submission")
    os.symlink(target, "submission")
elif variant == "dir_link_chain":
    os.rmdir("submission")
    os.symlink(target, "hop")
    os.symlink("hop", "submission")
elif variant == "file_link":
    os.symlink(f"{target}/submission.csv", "submission/submission.csv")
elif variant == "file_link_via_proc":
    os.symlink(f"/proc/1/root{target}/submission.csv", "submission/submission.csv")
elif variant == "hard_link":
    _shutil.copy("input/sample_submission.csv", "mine.csv")
    os.link("mine.csv", "submission/submission.csv")
elif variant == "fifo":
    os.mkfifo("submission/submission.csv")
print("HOSTILE", _json.dumps({"found": [], "tried": [variant]}), flush=True)
