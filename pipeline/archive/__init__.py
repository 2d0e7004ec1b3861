"""The archive's life cycle, over the Markdown notes themselves (rank 5: reads notes, uses skills' similarity).

``index`` (SQLite beside the notes: rows, FTS5, vectors; incremental) → ``query`` (ls, search, resolve) ·
``load`` (a context block for a new conversation) · ``tags`` (in-place edits) · ``links`` (lineage,
related, project notes) · ``git`` + ``versions`` (one commit per run, history, diff, revert) ·
``finish`` (what a run does after writing) · ``lock`` (commands take turns). The notes stay the truth:
the index is derived, and every command works the same on notes a person edited in Obsidian.
"""
