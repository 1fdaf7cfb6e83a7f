"""Importers: other schedulers' job definitions → the fields of ``app.schedule`` (pure
translation, no storage; ``duetime jobs import`` registers what they return)."""
