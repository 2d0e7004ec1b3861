"""Skills from repeated work: notes and their evidence → ``SkillDraft`` → ``SKILL.md``.

``evidence.py`` keeps the deterministic signals per session, ``lexical.py`` and ``embeddings.py``
measure similarity, ``promote.py`` detects candidates and stages drafts that ``synthesis.py``
writes, and ``store.py`` holds pending, approved and rejected skills.
"""
