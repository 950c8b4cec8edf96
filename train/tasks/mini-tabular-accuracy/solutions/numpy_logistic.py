"""Plain numpy logistic regression by gradient descent (no scikit-learn)."""
import numpy as np
import pandas as pd

train = pd.read_csv("input/train.csv")
test = pd.read_csv("input/test.csv")
features = [c for c in train.columns if c.startswith("f")]
x = np.c_[np.ones(len(train)), train[features].to_numpy()]
y = train["target"].to_numpy()
w = np.zeros(x.shape[1])
for _ in range(2000):
    p = 1 / (1 + np.exp(-x @ w))
    w -= 0.1 * x.T @ (p - y) / len(y)
xt = np.c_[np.ones(len(test)), test[features].to_numpy()]
pred = (1 / (1 + np.exp(-xt @ w)) > 0.5).astype(int)
pd.DataFrame({"id": test["id"], "target": pred}).to_csv("submission/submission.csv", index=False)
