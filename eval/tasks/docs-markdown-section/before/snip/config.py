"""Settings, from the environment."""

import os
from pathlib import Path


def load(env=None):
    env = os.environ if env is None else env
    return {
        # Where the snippet files live.
        "home": Path(env.get("SNIP_HOME", "~/.snippets")).expanduser(),
        # The editor `snip add` opens.
        "editor": env.get("SNIP_EDITOR", "vi"),
        # How many matches `snip find` lists at most.
        "max_results": int(env.get("SNIP_MAX_RESULTS", "20")),
    }
