"""Logistic regression on degree-2 polynomial features."""
import pandas as pd
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import PolynomialFeatures

train = pd.read_csv("input/train.csv")
test = pd.read_csv("input/test.csv")
features = [c for c in train.columns if c.startswith("f")]
model = make_pipeline(PolynomialFeatures(2), LogisticRegression(max_iter=2000))
model.fit(train[features], train["target"])
pd.DataFrame({"id": test["id"], "target": model.predict(test[features])}).to_csv(
    "submission/submission.csv", index=False)
