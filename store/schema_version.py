"""Which schema a DB file has, against the migrations this lab knows (store.schema): its version,
the steps it lacks, the steps a newer lab wrote, whether it is the lab's at all, and applying the
missing ones. Kept apart from the schema's history so that reading a file's state never needs the
steps' bodies in view."""

from __future__ import annotations

from sqlite_utils import Database, Migrations

from store.schema import migrations


def apply_migrations(db: Database) -> None:
    migrations.apply(db)


def pending_migrations(db: Database) -> list[str]:
    """Schema steps this lab knows and the DB lacks (a read; nothing is written)."""
    return [m.name for m in migrations.pending(db)]


def known_migrations() -> list[str]:
    """The schema steps this lab knows, in order (its schema version)."""
    return [m.name for m in migrations._migrations]


def unknown_migrations(db: Database) -> list[str]:
    """Schema steps the DB has and this lab does not know: it was written by a newer lab."""
    known = set(known_migrations())
    if not db.table(Migrations.migrations_table).exists():
        return []
    return [m.name for m in migrations.applied(db) if m.name not in known]


def is_lab_schema(db: Database) -> bool:
    """An empty file (a new lab) or one holding the lab's migrations (the first one creates the
    lab's tables in the same transaction that records it); False for an SQLite file of another
    program, even one with a table called `experiments`, which must not be given the lab's."""
    tables = {t for t in db.table_names() if not t.startswith("sqlite_")}
    if not tables:
        return True
    if Migrations.migrations_table not in tables:
        return False
    return bool(
        db.execute(
            f"SELECT 1 FROM [{Migrations.migrations_table}] WHERE migration_set = ? LIMIT 1",
            [migrations.name],
        ).fetchone()
    )


def schema_version(db: Database) -> int:
    return len(migrations.applied(db))
