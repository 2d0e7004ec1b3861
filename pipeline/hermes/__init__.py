"""Integration with Hermes itself: the ``on_session_finalize`` plugin (``plugin.py``), hook
install planning (``hook.py``, ``allowlist.py``, ``yamledit.py``) and writing sessions into a
``state.db`` (``importdb.py``)."""
