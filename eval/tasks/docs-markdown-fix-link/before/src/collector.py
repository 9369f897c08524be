"""Poll every station and queue its latest reading."""

import json
import time
import urllib.request

POLL_SECONDS = 360


def poll(station_url):
    with urllib.request.urlopen(station_url, timeout=10) as r:
        return json.load(r)


def run(stations, queue):
    while True:
        for s in stations:
            queue.put({"station": s["id"], "reading": poll(s["url"]), "at": time.time()})
        time.sleep(POLL_SECONDS)
