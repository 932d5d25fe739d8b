"""Data variants: functions that edit a batch's token windows in place, found by name.

A variant registers itself with :func:`registry.register_variant`; a training config selects
it by name (``training.data_variants``) with its options. ``copies`` holds the built-in
variants (natural text, copy spans, fixed-rate copies); each experiment adds its own module
(Bi-Induct snippets, semi-natural bigram sequences, Markov processes).
"""
