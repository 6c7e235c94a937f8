"""Simulated agent loops for the alarm's calibration, its tests and `ctxwatch demo`.

`text` makes seeded words, literals and messages; `rewriters` holds real rewrite functions
(summarizer, re-ranker, instruction-absorbing and paraphrasing rewriters); `loops` drives them
into healthy and contracting loops with a known onset; `meter` measures the cycles the way the
guard does and runs the contraction detector over them.
"""
