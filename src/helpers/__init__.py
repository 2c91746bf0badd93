"""Helpers for *Attention Mechanisms, an interactive textbook*.

Each module is one topic; chapters derive an idea in the open, then import the helper
and show that the two agree. Shape letters: B batch, Q queries, K keys, D features,
H heads, T positions.
"""

__version__ = "0.1.0"
