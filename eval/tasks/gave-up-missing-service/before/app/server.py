"""Serve a one-page status report."""
import json
from http.server import BaseHTTPRequestHandler, HTTPServer

CHECKS = {"api": "ok", "db": "ok", "queue": "degraded"}


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"status": CHECKS}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def main(port=8080):
    HTTPServer(("", port), Handler).serve_forever()


if __name__ == "__main__":
    main()
