"""Generation backends behind one interface (:mod:`train.generate.base`): transformers, vLLM."""
