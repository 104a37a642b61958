"""SQLite through sqlite-utils: schema and migrations, reads and writes, bundles. No Streamlit."""

from store.db import StoreError, open_db

__all__ = ["StoreError", "open_db"]
