"""Database connection pool."""


def connect_kwargs(settings):
    """The keyword arguments for the driver's connect() from the `database` settings."""
    db = settings["database"]
    kwargs = {
        "host": db["host"],
        "port": int(db["port"]),
        "dbname": db["name"],
        "user": db["user"],
    }
    if "connect_timeout_s" in db:
        kwargs["connect_timeout"] = int(db["connect_timeout_s"])
    return kwargs
