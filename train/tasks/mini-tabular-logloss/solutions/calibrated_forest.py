"""Random forest probabilities, shrunk toward the class prior to avoid overconfident zeros."""
import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestClassifier

train = pd.read_csv("input/train.csv")
test = pd.read_csv("input/test.csv")
features = [c for c in train.columns if c.startswith("x")]
model = RandomForestClassifier(n_estimators=300, min_samples_leaf=5, random_state=0)
model.fit(train[features], train["label"])
prior = np.bincount(train["label"], minlength=3) / len(train)
proba = 0.9 * model.predict_proba(test[features]) + 0.1 * prior
submission = pd.DataFrame(proba, columns=["class_0", "class_1", "class_2"])
submission.insert(0, "id", test["id"])
submission.to_csv("submission/submission.csv", index=False)
