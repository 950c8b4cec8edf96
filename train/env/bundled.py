"""Generate the bundled mini-competitions' data: train/test files, answers and leaderboard.

The package ships each task's hand-written files (``train/tasks/<slug>/``: description.md,
grader.toml, reference_solution.py, solutions/) but no data. The data is generated once per
install, on first use, into a data directory of this user (``$XDG_DATA_HOME/rollout-warehouse``,
else ``~/.local/share/rollout-warehouse``, mode 0700), from a random secret kept there: a node
sees the package (its interpreter's prefix is bound into the sandbox) and can import this
module, but without the secret it draws other answers. The private answers never live inside
the interpreter's prefix, the checkout or git, and the sandbox never binds the data directory;
the grader reads them from outside. ``python -m train.env.bundled`` regenerates them (with a
new secret).

Each task follows MLE-bench's layout (description.md, public/, private/, leaderboard.csv) plus
``grader.toml`` and ``scores.json`` (the baseline's and the reference model's scores on this
install's answers). The synthetic leaderboard is anchored on those two scores: teams spread
between the baseline and a little beyond the reference, so a reasonable solution lands
mid-table and there is room above it.
"""
from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import tempfile
from pathlib import Path

N_TEAMS = 300
PACKAGE_TASKS = Path(__file__).resolve().parent.parent / "tasks"  # the shipped, hand-written files
GENERATOR_VERSION = 2  # bump when the data a seed gives changes: installs regenerate
HAND_WRITTEN = ("description.md", "grader.toml", "reference_solution.py", "solutions")

TEXT_TOPICS = {
    "sports": "match goal team coach league score player season win stadium referee",
    "tech": "software chip laptop code cloud startup robot network battery update",
    "food": "recipe bake spicy dinner flavor chef kitchen sauce fresh bread",
    "travel": "flight hotel beach passport museum island journey tour luggage train",
}
FILLER = "the a today really new my our very some about with from this that great".split()


def _tabular_accuracy(rng):
    import numpy as np
    import pandas as pd

    n, d = 1000, 6
    x = rng.normal(size=(n, d))
    logit = 1.6 * x[:, 0] - 1.1 * x[:, 1] + 0.8 * x[:, 2] * x[:, 3] + 0.5 * np.sin(2 * x[:, 4])
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    frame = pd.DataFrame(np.round(x, 4), columns=[f"f{i}" for i in range(d)])
    frame.insert(0, "id", np.arange(n))
    frame["target"] = y
    return frame, ["target"]


def _tabular_logloss(rng):
    import numpy as np
    import pandas as pd

    n, d = 1000, 5
    x = rng.normal(size=(n, d))
    w = rng.normal(scale=1.2, size=(d, 3))
    logits = x @ w + 0.6 * np.stack([x[:, 0] ** 2, x[:, 1] * x[:, 2], -x[:, 3] ** 2], axis=1)
    p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)  # (n, 3)
    y = np.array([rng.choice(3, p=row) for row in p])
    frame = pd.DataFrame(np.round(x, 4), columns=[f"x{i}" for i in range(d)])
    frame.insert(0, "id", np.arange(n))
    frame["label"] = y
    return frame, ["label"]


def _regression_rmse(rng):
    import numpy as np
    import pandas as pd

    n, d = 1000, 5
    x = rng.uniform(-2, 2, size=(n, d))
    y = 3 * np.sin(x[:, 0]) + x[:, 1] ** 2 - 2 * x[:, 2] + x[:, 3] * x[:, 4] + rng.normal(size=n)
    frame = pd.DataFrame(np.round(x, 4), columns=[f"x{i}" for i in range(d)])
    frame.insert(0, "id", np.arange(n))
    frame["target"] = np.round(y, 4)
    return frame, ["target"]


def _text_classification(rng):
    import numpy as np
    import pandas as pd

    topics = sorted(TEXT_TOPICS)
    vocab = {t: TEXT_TOPICS[t].split() for t in topics}
    rows = []
    for _ in range(1000):
        topic = topics[rng.integers(len(topics))]
        other = topics[rng.integers(len(topics))]
        words = list(rng.choice(vocab[topic], size=rng.integers(2, 5)))
        words += list(rng.choice(vocab[other], size=rng.integers(0, 3)))
        words += list(rng.choice(FILLER, size=rng.integers(3, 7)))
        rng.shuffle(words)
        rows.append((" ".join(words), topic))
    frame = pd.DataFrame(rows, columns=["text", "category"])
    frame.insert(0, "id", np.arange(len(frame)))
    return frame, ["category"]


def _score(metric, y_true, pred):
    from train.env.metrics import METRICS

    return METRICS[metric](y_true, pred)


def _reference_predictions(slug, train, test):
    """Baseline and reference predictions, the same models as the reference solutions."""
    import numpy as np
    from sklearn.ensemble import GradientBoostingRegressor
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.naive_bayes import MultinomialNB
    from sklearn.preprocessing import PolynomialFeatures

    if slug == "mini-text-classification":
        vec = CountVectorizer()
        model = MultinomialNB().fit(vec.fit_transform(train["text"]), train["category"])
        majority = train["category"].mode()[0]
        return np.full(len(test), majority), model.predict(vec.transform(test["text"]))
    feats = [c for c in train.columns if c not in ("id", "target", "label")]
    x, xt = train[feats].to_numpy(), test[feats].to_numpy()
    if slug == "mini-regression-rmse":
        model = GradientBoostingRegressor(random_state=0).fit(x, train["target"])
        return np.full(len(test), train["target"].mean()), model.predict(xt)
    poly = PolynomialFeatures(2)
    if slug == "mini-tabular-logloss":
        model = LogisticRegression(max_iter=2000).fit(poly.fit_transform(x), train["label"])
        prior = np.bincount(train["label"], minlength=3) / len(train)
        return np.tile(prior, (len(test), 1)), model.predict_proba(poly.transform(xt))
    model = LogisticRegression(max_iter=2000).fit(poly.fit_transform(x), train["target"])
    return np.full(len(test), train["target"].mode()[0]), model.predict(poly.transform(xt))


def _leaderboard(rng, baseline: float, reference: float, lower_is_better: bool, bound):
    """N_TEAMS scores between the baseline and 15% beyond the reference, best first."""
    import numpy as np
    import pandas as pd

    top = reference + 0.15 * (reference - baseline)
    top = min(top, bound) if not lower_is_better else max(top, bound)
    scores = baseline + (top - baseline) * rng.beta(3.0, 1.3, size=N_TEAMS)
    scores = np.sort(np.round(scores, 5))
    if not lower_is_better:
        scores = scores[::-1]
    return pd.DataFrame({
        "teamId": np.arange(1, N_TEAMS + 1) * 7 + 1000,
        "teamName": [f"team_{i:03d}" for i in range(N_TEAMS)],
        "submissionDate": "2026-01-01 00:00:00",
        "score": scores,
    })


TASK_SPECS = {
    # slug: (builder, metric, lower_is_better, bound on the metric's best value)
    "mini-tabular-accuracy": (_tabular_accuracy, "accuracy", False, 1.0),
    "mini-tabular-logloss": (_tabular_logloss, "logloss", True, 0.0),
    "mini-regression-rmse": (_regression_rmse, "rmse", True, 0.0),
    "mini-text-classification": (_text_classification, "accuracy", False, 1.0),
}


def _write_task(out: Path, slug: str, seed: int) -> dict:
    """The data files of one task into ``out``; returns the baseline's and reference's scores."""
    import numpy as np

    builder, metric, lower, bound = TASK_SPECS[slug]
    rng = np.random.default_rng(seed)
    frame, targets = builder(rng)
    train, test = frame.iloc[:600].reset_index(drop=True), frame.iloc[600:].reset_index(drop=True)
    (out / "public").mkdir(parents=True, exist_ok=True)
    (out / "private").mkdir(mode=0o700, parents=True, exist_ok=True)
    train.to_csv(out / "public" / "train.csv", index=False)
    test.drop(columns=targets).to_csv(out / "public" / "test.csv", index=False)
    answers, sample = _answers_and_sample(slug, test, targets)
    answers.to_csv(out / "private" / "answers.csv", index=False)
    sample.to_csv(out / "public" / "sample_submission.csv", index=False)
    base_pred, ref_pred = _reference_predictions(slug, train, test)
    y_true = _truth(slug, answers)
    scores = {"baseline": float(_score(metric, y_true, base_pred)),
              "reference": float(_score(metric, y_true, ref_pred))}
    board = _leaderboard(rng, scores["baseline"], scores["reference"], lower, bound)
    board.to_csv(out / "leaderboard.csv", index=False)
    (out / "scores.json").write_text(json.dumps(scores) + "\n")
    return scores


def _answers_and_sample(slug, test, targets):
    import pandas as pd

    if slug == "mini-tabular-logloss":
        onehot = pd.get_dummies(test["label"]).reindex(columns=[0, 1, 2], fill_value=False)
        answers = pd.DataFrame({"id": test["id"]})
        for k in range(3):
            answers[f"class_{k}"] = onehot[k].astype(int).to_numpy()
        sample = answers.copy()
        sample[[f"class_{k}" for k in range(3)]] = 1 / 3
        return answers, sample
    answers = test[["id", *targets]].copy()
    sample = answers.copy()
    fill = {"mini-text-classification": "sports", "mini-regression-rmse": 0.0}.get(slug, 0)
    sample[targets[0]] = fill
    return answers, sample


def _truth(slug, answers):
    if slug == "mini-tabular-logloss":
        return answers[[f"class_{k}" for k in range(3)]].to_numpy()
    return answers.iloc[:, 1].to_numpy()


def data_root() -> Path:
    """This user's data directory of the package (never inside the interpreter's prefix)."""
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "rollout-warehouse"


def tasks_root() -> Path:
    """The bundled tasks with their data (generated here on first use)."""
    import fcntl

    root = data_root() / f"tasks-v{GENERATOR_VERSION}"
    if _complete(root):
        return root
    root.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with open(root.parent / ".tasks.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one generator at a time; the others wait and reuse it
        if not _complete(root):
            generate(root)
    return root


def _complete(root: Path) -> bool:
    return all((root / slug / "scores.json").is_file() for slug in TASK_SPECS)


def generate(root: Path | None = None, log=None) -> Path:
    """(Re)write every bundled task, data and hand-written files, under ``root``, from a new
    secret. Built beside it and renamed into place, so a concurrent reader sees all or none."""
    root = root or data_root() / f"tasks-v{GENERATOR_VERSION}"
    root.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(root.parent, 0o700)  # the answers' parent: no other user may enter
    secret = secrets.token_bytes(32)  # never written anywhere: the data is all that is kept
    build = Path(tempfile.mkdtemp(prefix=".tasks-", dir=root.parent))
    try:
        for slug in sorted(TASK_SPECS):
            _copy_hand_written(PACKAGE_TASKS / slug, build / slug)
            scores = _write_task(build / slug, slug, _seed(secret, slug))
            if log:
                log(f"{slug}: baseline={scores['baseline']:.5f} reference={scores['reference']:.5f}")
        os.chmod(build, 0o755)
        old = root.with_name(f".{root.name}-old-{os.getpid()}")
        if root.exists():
            root.rename(old)
        try:
            build.rename(root)
        except OSError:  # another process generated it meanwhile: theirs stands
            if not root.is_dir():
                raise
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(build, ignore_errors=True)
    return root


def _copy_hand_written(src: Path, dest: Path) -> None:
    dest.mkdir()
    for name in HAND_WRITTEN:
        if (src / name).is_dir():
            shutil.copytree(src / name, dest / name)
        elif (src / name).is_file():
            shutil.copyfile(src / name, dest / name)


def _seed(secret: bytes, slug: str) -> int:
    return int.from_bytes(hashlib.sha256(secret + slug.encode()).digest()[:16], "big")


if __name__ == "__main__":
    print(f"generated {generate(log=print)}")
