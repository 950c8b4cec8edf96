"""Multinomial logistic regression on standardised raw features."""
import pandas as pd
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

train = pd.read_csv("input/train.csv")
test = pd.read_csv("input/test.csv")
features = [c for c in train.columns if c.startswith("x")]
model = make_pipeline(StandardScaler(), LogisticRegression(C=0.5, max_iter=1000))
model.fit(train[features], train["label"])
submission = pd.DataFrame(model.predict_proba(test[features]), columns=["class_0", "class_1", "class_2"])
submission.insert(0, "id", test["id"])
submission.to_csv("submission/submission.csv", index=False)
