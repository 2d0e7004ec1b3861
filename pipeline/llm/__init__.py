"""The model client: ``Settings`` → a litellm + instructor client for one run.

``choice.py`` resolves which model (flag, env, distill.yaml, Hermes config, the embedded one),
``client.py`` is the one client (retry policy, budget, call accounting) and ``local.py`` serves
the embedded GGUF on 127.0.0.1 for the length of a run. Knows nothing of sessions or notes.
"""
