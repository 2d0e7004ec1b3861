"""Integrations with other knowledge systems, through their own interfaces (rank 5, beside ``hermes/``).

``gbrain``: the client (``gbrain call`` or ``gbrain serve``), ``gbrain_page``: note ⇄ page,
``gbrain_state``: what was pushed, ``gbrain_sync``: ``push_to_gbrain`` / ``pull_from_gbrain``.
"""
