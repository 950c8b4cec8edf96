"""Bag of words with multinomial naive Bayes."""
import pandas as pd
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.naive_bayes import MultinomialNB

train = pd.read_csv("input/train.csv")
test = pd.read_csv("input/test.csv")
vectorizer = CountVectorizer()
model = MultinomialNB().fit(vectorizer.fit_transform(train["text"]), train["category"])
pred = model.predict(vectorizer.transform(test["text"]))
pd.DataFrame({"id": test["id"], "category": pred}).to_csv("submission/submission.csv", index=False)
