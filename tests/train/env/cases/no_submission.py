print("trained a model but forgot to write the submission")
