"""Summarise: chunks + facts → ``SessionSummary``.

``extractive.py`` needs no model; ``mapreduce.py`` is the LLM map-reduce over compaction
generations, with its input shaped by ``shaping.py``, its response contract in ``schema.py``, its
prompts loaded by ``prompts.py`` from ``prompts/`` and its answers cached by ``cache.py``.
"""
