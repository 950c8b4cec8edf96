"""Synthetic twins of the arms' MLE-bench competitions, in the layout ``mlebench prepare``
leaves (openai/mle-bench, ``mlebench/competitions/<id>/prepare.py`` and ``config.yaml``):
the same file names, columns and id formats, a few dozen rows, and a leaderboard (best team
first, as MLE-bench ships them) whose scores straddle the sample submission's.

``build_twin(root, competition)`` writes ``root/<competition>/`` and returns a dict with what
the tests need: the sample submission's score computed by hand from MLE-bench's metric, the
leaderboard, a perfect submission and an invalid one.
"""
from __future__ import annotations

import io
import math
import zipfile
from pathlib import Path

N_ROWS = 40
SPOOKY_SAMPLE = {"EAP": 0.403493538995863, "HPL": 0.287808366106543, "MWS": 0.308698094897594}
PLANT_CLASSES = ["healthy", "multiple_diseases", "rust", "scab"]
COMPETITIONS = (
    "aerial-cactus-identification", "dogs-vs-cats-redux-kernels-edition",
    "text-normalization-challenge-english-language", "text-normalization-challenge-russian-language",
    "spooky-author-identification", "plant-pathology-2020-fgvc7", "denoising-dirty-documents",
    "spaceship-titanic",
)
GRADER_NAMES = {  # grader.name of each config.yaml in MLE-bench's registry
    "aerial-cactus-identification": ("auc-roc", "test.csv", "public/sample_submission.csv"),
    "dogs-vs-cats-redux-kernels-edition": ("log-loss", "answers.csv", "public/sample_submission.csv"),
    "text-normalization-challenge-english-language": ("accuracy", "answers.csv", "private/sample_submission.csv"),
    "text-normalization-challenge-russian-language": ("accuracy", "answers.csv", "private/sample_submission.csv"),
    "spooky-author-identification": ("multi-class-log-loss", "test.csv", "public/sample_submission.csv"),
    "plant-pathology-2020-fgvc7": ("mean-column-wise-roc-auc", "test.csv", "public/sample_submission.csv"),
    "denoising-dirty-documents": ("root_mean_squared_error", "answers.csv", "public/sampleSubmission.csv"),
    "spaceship-titanic": ("accuracy", "test.csv", "public/sample_submission.csv"),
}


def build_twin(root: Path, competition: str, seed: int = 0) -> dict:
    import numpy as np

    rng = np.random.default_rng(seed)
    task_dir = Path(root) / competition
    public, private = task_dir / "prepared" / "public", task_dir / "prepared" / "private"
    public.mkdir(parents=True, exist_ok=True)
    private.mkdir(parents=True, exist_ok=True)
    twin = BUILDERS[competition](rng, public, private)
    name, answers, sample = GRADER_NAMES[competition]
    (task_dir / "config.yaml").write_text(
        f"id: {competition}\nname: {competition}\ncompetition_type: simple\nawards_medals: false\n"
        f"description: mlebench/competitions/{competition}/description.md\n\n"
        f"dataset:\n  answers: {competition}/prepared/private/{answers}\n"
        f"  sample_submission: {competition}/prepared/{sample}\n\n"
        f"grader:\n  name: {name}\n  grade_fn: mlebench.competitions.{competition}.grade:grade\n\n"
        f"preparer: mlebench.competitions.{competition}.prepare:prepare\n")
    (task_dir / "description.md").write_text(f"# {competition} (synthetic twin)\n\nWrite ./submission/submission.csv.\n")
    twin["board"] = _leaderboard(task_dir, twin["sample_score"], twin["lower"])
    twin["dir"] = task_dir
    return twin


def _leaderboard(task_dir: Path, around: float, lower: bool) -> list[float]:
    """Ten teams, best first: four better than ``around``, one equal, five worse."""
    import pandas as pd

    step = 0.01 if lower else -0.01  # towards worse
    around = round(around, 5)
    scores = [round(around + step * k, 5) for k in range(-4, 6)]
    pd.DataFrame({"teamId": range(101, 111), "teamName": [f"team_{i}" for i in range(10)],
                  "submissionDate": "2020-01-01 00:00:00", "score": scores}).to_csv(
        task_dir / "leaderboard.csv", index=False)
    return scores


def _zip(path: Path, names: list[str]) -> None:
    with zipfile.ZipFile(path, "w") as zf:
        for name in names:
            zf.writestr(name, b"")


def _png(path: Path, pixels) -> None:
    from PIL import Image

    Image.fromarray(pixels).save(path)


def _aerial(rng, public, private) -> dict:
    import pandas as pd

    ids = [f"{rng.integers(16**12):012x}{i:020x}.jpg" for i in range(2 * N_ROWS)]
    frame = pd.DataFrame({"id": ids, "has_cactus": rng.integers(0, 2, len(ids))})
    train, test = frame.iloc[:N_ROWS], frame.iloc[N_ROWS:]
    train.to_csv(public / "train.csv", index=False)
    test.to_csv(private / "test.csv", index=False)
    test.assign(has_cactus=0.5).to_csv(public / "sample_submission.csv", index=False)
    _zip(public / "train.zip", [f"train/{i}" for i in train["id"]])
    _zip(public / "test.zip", [f"test/{i}" for i in test["id"]])
    perfect = test.assign(has_cactus=test["has_cactus"].astype(float))
    return {"lower": False, "sample_score": 0.5, "perfect": perfect, "perfect_score": 1.0,
            "invalid": test.assign(id=test["id"].str.replace(".jpg", ".png")), "invalid_says": "values do not match"}


def _dogs_vs_cats(rng, public, private) -> dict:
    import pandas as pd

    labels = rng.integers(0, 2, N_ROWS)
    answers = pd.DataFrame({"id": range(1, N_ROWS + 1), "label": labels})
    answers.to_csv(private / "answers.csv", index=False)
    answers.assign(label=0.5).to_csv(public / "sample_submission.csv", index=False)
    _zip(public / "train.zip", [f"train/{k}.{i}.jpg" for k in ("cat", "dog") for i in range(5)])
    _zip(public / "test.zip", [f"test/{i}.jpg" for i in answers["id"]])
    return {"lower": True, "sample_score": math.log(2), "perfect": answers.assign(label=labels.astype(float)),
            "perfect_score": 0.0, "invalid": answers.assign(label=labels * 2.0), "invalid_says": "between 0 and 1"}


def _text_normalization(prefix: str):
    def build(rng, public, private) -> dict:
        import csv

        import pandas as pd

        words = ["hello", "12", "Dr.", "world", "1990", "NA", "kg", "the"]
        spoken = {"12": "twelve", "Dr.": "doctor", "1990": "nineteen ninety", "kg": "kilograms"}
        rows = [(s, t, words[rng.integers(len(words))]) for s in range(N_ROWS // 4) for t in range(4)]
        test = pd.DataFrame(rows, columns=["sentence_id", "token_id", "before"])
        test["after"] = test["before"].map(lambda w: spoken.get(w, w))
        test["id"] = test["sentence_id"].astype(str) + "_" + test["token_id"].astype(str)
        quoted = {"index": False, "quotechar": '"', "quoting": csv.QUOTE_NONNUMERIC}
        test[["id", "after"]].to_csv(private / "answers.csv", **quoted)
        sample = test[["id", "before"]].rename(columns={"before": "after"})
        sample.to_csv(private / "sample_submission.csv", **quoted)
        for name, frame in ((f"{prefix}_test_2.csv", test[["sentence_id", "token_id", "before"]]),
                            (f"{prefix}_sample_submission_2.csv", sample),
                            (f"{prefix}_train.csv", test.assign(**{"class": "PLAIN"})[
                                ["sentence_id", "token_id", "class", "before", "after"]])):
            with zipfile.ZipFile(public / f"{name}.zip", "w") as zf:
                zf.writestr(name, frame.to_csv(**quoted))
        return {"lower": False, "sample_score": float((test["before"] == test["after"]).mean()),
                "perfect": test[["id", "after"]], "perfect_score": 1.0,
                "invalid": test[["id", "after"]].iloc[1:], "invalid_says": "rows"}
    return build


def _spooky(rng, public, private) -> dict:
    import numpy as np
    import pandas as pd

    ids = [f"id{rng.integers(10**5):05d}{i:02d}" for i in range(2 * N_ROWS)]
    authors = np.array(list(SPOOKY_SAMPLE))[rng.integers(0, 3, len(ids))]
    train = pd.DataFrame({"id": ids[:N_ROWS], "text": "It was a dark night.", "author": authors[:N_ROWS]})
    train.to_csv(public / "train.csv", index=False)
    train.drop(columns="author").assign(id=ids[N_ROWS:]).to_csv(public / "test.csv", index=False)
    truth = authors[N_ROWS:]
    onehot = pd.DataFrame({"id": ids[N_ROWS:], **{a: (truth == a).astype(int) for a in SPOOKY_SAMPLE}})
    onehot.to_csv(private / "test.csv", index=False)
    onehot.assign(**SPOOKY_SAMPLE).to_csv(public / "sample_submission.csv", index=False)
    sample_score = -float(np.mean([math.log(SPOOKY_SAMPLE[a]) for a in truth]))
    unnormalised = onehot.assign(EAP=0.5, HPL=0.5, MWS=0.5)
    return {"lower": True, "sample_score": sample_score, "perfect": onehot.astype({a: float for a in SPOOKY_SAMPLE}),
            "perfect_score": 0.0, "invalid": unnormalised, "invalid_says": "sum to one"}


def _plant(rng, public, private) -> dict:
    import numpy as np
    import pandas as pd

    (public / "images").mkdir(exist_ok=True)
    labels = rng.integers(0, 4, 2 * N_ROWS)
    labels[:4] = labels[N_ROWS:N_ROWS + 4] = range(4)  # every class in train and test
    onehot = np.eye(4, dtype=int)[labels]
    ids = [f"Train_{i}" for i in range(N_ROWS)] + [f"Test_{i}" for i in range(N_ROWS)]
    frame = pd.DataFrame(onehot, columns=PLANT_CLASSES)
    frame.insert(0, "image_id", ids)
    train, answers = frame.iloc[:N_ROWS], frame.iloc[N_ROWS:]
    train.to_csv(public / "train.csv", index=False)
    answers[["image_id"]].to_csv(public / "test.csv", index=False)
    answers.to_csv(private / "test.csv", index=False)
    answers.assign(**{c: 0.25 for c in PLANT_CLASSES}).to_csv(public / "sample_submission.csv", index=False)
    for image_id in ids[:3]:
        _png(public / "images" / f"{image_id}.jpg", np.zeros((4, 4), dtype=np.uint8))
    return {"lower": False, "sample_score": 0.5, "perfect": answers.astype({c: float for c in PLANT_CLASSES}),
            "perfect_score": 1.0, "invalid": answers.assign(extra=1.0), "invalid_says": "columns"}


def _denoising(rng, public, private) -> dict:
    import numpy as np
    import pandas as pd

    for sub in ("train", "train_cleaned", "test"):
        (public / sub).mkdir(exist_ok=True)
    rows = []
    for image in (3, 7):  # two test images of 4 x 5 pixels, ids image_row_col as to_df writes them
        pixels = rng.integers(0, 256, (4, 5)).astype(np.uint8)
        _png(public / "test" / f"{image}.png", pixels)
        rows += [(f"{image}_{r + 1}_{c + 1}", pixels[r, c] / 255.0) for r in range(4) for c in range(5)]
    _png(public / "train" / "1.png", np.zeros((4, 5), dtype=np.uint8))
    _png(public / "train_cleaned" / "1.png", np.full((4, 5), 255, dtype=np.uint8))
    answers = pd.DataFrame(rows, columns=["id", "value"])
    answers.to_csv(private / "answers.csv", index=False)
    answers.assign(value=1).to_csv(public / "sampleSubmission.csv", index=False)
    sample_score = math.sqrt(float(np.mean((1 - answers["value"]) ** 2)))
    return {"lower": True, "sample_score": sample_score, "perfect": answers, "perfect_score": 0.0,
            "invalid": answers.assign(value="white"), "invalid_says": "numeric"}


def _spaceship(rng, public, private) -> dict:
    import pandas as pd

    n = 2 * N_ROWS
    frame = pd.DataFrame({
        "PassengerId": [f"{g:04d}_{m:02d}" for g, m in zip(range(13, 13 + n), rng.integers(1, 4, n))],
        "HomePlanet": rng.choice(["Earth", "Europa", "Mars"], n), "CryoSleep": rng.integers(0, 2, n).astype(bool),
        "Age": rng.integers(1, 80, n), "Transported": rng.integers(0, 2, n).astype(bool)})
    train, test = frame.iloc[:N_ROWS], frame.iloc[N_ROWS:]
    train.to_csv(public / "train.csv", index=False)
    test.drop(columns="Transported").to_csv(public / "test.csv", index=False)
    test.to_csv(private / "test.csv", index=False)  # every column, as spaceship-titanic's prepare.py
    test[["PassengerId"]].assign(Transported=False).to_csv(public / "sample_submission.csv", index=False)
    return {"lower": False, "sample_score": float((~test["Transported"]).mean()),
            "perfect": test[["PassengerId", "Transported"]], "perfect_score": 1.0,
            "invalid": test[["PassengerId"]].assign(target=True), "invalid_says": "columns"}


BUILDERS = {
    "aerial-cactus-identification": _aerial,
    "dogs-vs-cats-redux-kernels-edition": _dogs_vs_cats,
    "text-normalization-challenge-english-language": _text_normalization("en"),
    "text-normalization-challenge-russian-language": _text_normalization("ru"),
    "spooky-author-identification": _spooky,
    "plant-pathology-2020-fgvc7": _plant,
    "denoising-dirty-documents": _denoising,
    "spaceship-titanic": _spaceship,
}


def to_csv_text(frame) -> str:
    buf = io.StringIO()
    frame.to_csv(buf, index=False)
    return buf.getvalue()
