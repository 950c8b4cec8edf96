"""The competition metrics, scikit-learn's as in MLE-bench's grade.py of each competition.

Apart from grading (train.env.grading) so that the bundled tasks' generator scores its
reference models with the very functions the grader uses, without importing the grader.
"""
from __future__ import annotations

# Each takes the answers' targets and the submission's, aligned by id: (n,) for one target
# column, (n, k) for k. They are scikit-learn's, as in MLE-bench's grade.py of each
# competition (openai/mle-bench, mlebench/competitions/<id>/grade.py).

def accuracy(y_true, pred) -> float:
    """Share of exact matches, compared as text (text-normalization's grade.py casts ``after``
    to str; spaceship-titanic's and the bundled tasks' labels compare the same way)."""
    import numpy as np
    from sklearn.metrics import accuracy_score

    y_true, pred = np.asarray(y_true).astype(str), np.asarray(pred).astype(str)
    if y_true.ndim == 2:  # several target columns: every cell counts
        return float(np.mean(y_true == pred))
    return float(accuracy_score(y_true, pred))


def rmse(y_true, pred) -> float:
    """denoising-dirty-documents' grade.py: ``root_mean_squared_error`` over pixel ids."""
    from sklearn.metrics import root_mean_squared_error

    return float(root_mean_squared_error(y_true, pred))


def logloss(y_true, pred) -> float:
    """Log loss. Binary (dogs-vs-cats' grade.py): y_true (n,) of 0/1, pred (n,) P(label=1).
    Multi-class (spooky's grade.py): y_true one-hot (n, k), pred probabilities (n, k).

    scikit-learn clips to [eps, 1 - eps] (eps of float64); rows are renormalised to sum to one
    first, as ``log_loss`` did up to scikit-learn 1.6 (MLE-bench pins >= 1.5). For a
    submission that passed the row-sum check the renormalisation changes nothing."""
    import numpy as np
    from sklearn.metrics import log_loss

    p = np.asarray(pred, dtype=float)
    if p.ndim == 2:
        p = p / p.sum(axis=1, keepdims=True)  # (n, k)
        return float(log_loss(np.asarray(y_true), p))
    return float(log_loss(np.asarray(y_true, dtype=float), p, labels=[0, 1]))


def roc_auc(y_true, pred) -> float:
    """aerial-cactus-identification's grade.py: ``roc_auc_score`` of the probabilities."""
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y_true, pred))


def mean_columnwise_roc_auc(y_true, pred) -> float:
    """plant-pathology-2020-fgvc7's grade.py: the mean of ``roc_auc_score`` per class column."""
    import numpy as np
    from sklearn.metrics import roc_auc_score

    y_true, pred = np.asarray(y_true), np.asarray(pred)
    if y_true.ndim == 1:
        return float(roc_auc_score(y_true, pred))
    return float(np.mean([roc_auc_score(y_true[:, j], pred[:, j]) for j in range(y_true.shape[1])]))


METRICS = {"accuracy": accuracy, "rmse": rmse, "logloss": logloss, "roc_auc": roc_auc,
           "mean_columnwise_roc_auc": mean_columnwise_roc_auc}
