"""Deterministic facts about a session, no LLM: ``Session`` + chunks → ``Facts``.

``derive.py`` (files touched, commands, errors, tools, tokens, cost), ``shell.py`` (what a shell
command writes or deletes), ``turns.py`` (what kind of turn a user message is), ``endstate.py``
(the evidence-based end state) and ``lang.py`` (the session's language). The summarisers ground
themselves in these facts, and the end state decided here is never overridden by a model.
"""
