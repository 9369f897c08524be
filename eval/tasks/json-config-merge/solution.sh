python3 - <<'PY'
import json
with open("config/app.json") as f:
    config = json.load(f)
with open("new_flags.json") as f:
    config["features"].update(json.load(f))
with open("config/app.json", "w") as f:
    json.dump(config, f, indent=2)
    f.write("\n")
PY
