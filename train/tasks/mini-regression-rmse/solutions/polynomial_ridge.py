"""Ridge regression on degree-3 polynomial features."""
import pandas as pd
from sklearn.linear_model import Ridge
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import PolynomialFeatures, StandardScaler

train = pd.read_csv("input/train.csv")
test = pd.read_csv("input/test.csv")
features = [c for c in train.columns if c.startswith("x")]
model = make_pipeline(PolynomialFeatures(3), StandardScaler(), Ridge(alpha=1.0))
model.fit(train[features], train["target"])
pd.DataFrame({"id": test["id"], "target": model.predict(test[features])}).to_csv(
    "submission/submission.csv", index=False)
