"""Simulated agent loops for the alarm's calibration, its tests and `ctxwatch demo`.

`text` makes seeded words, literals and messages; `rewriters` holds real rewrite functions
(summarizer, re-ranker, instruction-absorbing and paraphrasing rewriters); `loops` drives them
into healthy and contracting loops with a known onset; `toolloop` and `docsloop` run small tool-using
agent loops in provider shape (`docsloop`: docs/guard.md's own loops, long, with sizes that vary as
real ones do); `meter` measures the cycles the way the
guard does and runs the contraction detector over them.
"""
