"""All SQL of the lab: schema and migrations, writes (repo), reads (queries), bundles, the team
folder. Imports core only; never tuning, ui or Streamlit."""

from store.db import StoreError, connect, open_db

__all__ = ["StoreError", "connect", "open_db"]
