"""Logistic regression on degree-2 polynomial features, predicting probabilities."""
import pandas as pd
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import PolynomialFeatures

train = pd.read_csv("input/train.csv")
test = pd.read_csv("input/test.csv")
features = [c for c in train.columns if c.startswith("x")]
model = make_pipeline(PolynomialFeatures(2), LogisticRegression(max_iter=2000))
model.fit(train[features], train["label"])
proba = model.predict_proba(test[features])
submission = pd.DataFrame(proba, columns=[f"class_{k}" for k in model.classes_])
submission.insert(0, "id", test["id"])
submission.to_csv("submission/submission.csv", index=False)
