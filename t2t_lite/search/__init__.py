"""The search engine: beam search, greedy search and sampling over any step function, and
constraints on what a search may emit. Model-agnostic: a search sees ids and logits only."""
