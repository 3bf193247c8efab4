"""The ``folder`` connector (:mod:`.connector`), registered by :mod:`.extension`."""
