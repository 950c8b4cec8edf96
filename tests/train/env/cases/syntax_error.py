import pandas as pd
print("reading")
x = pd.read_csv("input/train.csv"
