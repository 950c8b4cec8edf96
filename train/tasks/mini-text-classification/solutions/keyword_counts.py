"""No model at all: count each topic's most frequent training words in the text."""
from collections import Counter

import pandas as pd

train = pd.read_csv("input/train.csv")
test = pd.read_csv("input/test.csv")
word_topic = Counter()
for text, topic in zip(train["text"], train["category"]):
    for word in text.split():
        word_topic[(word, topic)] += 1
topics = sorted(train["category"].unique())


def predict(text):
    votes = {t: sum(word_topic[(w, t)] for w in text.split()) for t in topics}
    return max(votes, key=votes.get)


pd.DataFrame({"id": test["id"], "category": [predict(t) for t in test["text"]]}).to_csv(
    "submission/submission.csv", index=False)
