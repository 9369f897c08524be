import tomllib


def load(path="config/app.toml"):
    with open(path, "rb") as f:
        cfg = tomllib.load(f)
    cfg["cache"].setdefault("ttl_seconds", 600)
    return cfg
