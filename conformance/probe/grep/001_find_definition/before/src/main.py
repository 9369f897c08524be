from settings import load_config

cfg = load_config("a.json")
