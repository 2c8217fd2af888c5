"""Your implementations: fill in the modules, in curriculum order (_tasks.py, _negation_task.py, _distance_task.py, _facts.py, _tokenization_corpus.py given ready made)."""
