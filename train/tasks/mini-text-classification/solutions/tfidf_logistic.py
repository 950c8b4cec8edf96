"""TF-IDF features with logistic regression."""
import pandas as pd
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline

train = pd.read_csv("input/train.csv")
test = pd.read_csv("input/test.csv")
model = make_pipeline(TfidfVectorizer(), LogisticRegression(max_iter=1000))
model.fit(train["text"], train["category"])
pd.DataFrame({"id": test["id"], "category": model.predict(test["text"])}).to_csv(
    "submission/submission.csv", index=False)
