"""Schema migrations, applied in order."""

MIGRATIONS = [
    "CREATE TABLE notes (id INTEGER PRIMARY KEY, title TEXT, text TEXT)",
    "ALTER TABLE notes ADD COLUMN created REAL",
]


def apply(conn):
    for sql in MIGRATIONS:
        conn.execute(sql)
    conn.commit()
