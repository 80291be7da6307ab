"""The reference's `art.preprocessing` package: here only its `tokenize` module (see art.training.reference_tokenize)."""
