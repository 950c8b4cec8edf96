"""Random forest on the raw features."""
import pandas as pd
from sklearn.ensemble import RandomForestClassifier

train = pd.read_csv("input/train.csv")
test = pd.read_csv("input/test.csv")
features = [c for c in train.columns if c.startswith("f")]
model = RandomForestClassifier(n_estimators=200, min_samples_leaf=3, random_state=0)
model.fit(train[features], train["target"])
pd.DataFrame({"id": test["id"], "target": model.predict(test[features])}).to_csv(
    "submission/submission.csv", index=False)
