# Tries to copy the private answers (path filled in by the test) into its submission.
import shutil

shutil.copy("ANSWERS_PATH", "submission/submission.csv")
