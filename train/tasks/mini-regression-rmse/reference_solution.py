"""Gradient boosting regressor on the raw features."""
import pandas as pd
from sklearn.ensemble import GradientBoostingRegressor

train = pd.read_csv("input/train.csv")
test = pd.read_csv("input/test.csv")
features = [c for c in train.columns if c.startswith("x")]
model = GradientBoostingRegressor(random_state=0).fit(train[features], train["target"])
pd.DataFrame({"id": test["id"], "target": model.predict(test[features])}).to_csv(
    "submission/submission.csv", index=False)
