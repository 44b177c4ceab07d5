"""Sample app: a WebSocket API whose sessions expire through ``SessionExpiry``.

Not part of the published package; ``app.py`` at the repository root synthesizes it.
"""
