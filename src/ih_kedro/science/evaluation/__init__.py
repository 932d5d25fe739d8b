"""TODO(relayout): stage docstring."""
