"""A minimal Alertmanager webhook receiver: prints one JSON line per alert it is sent.

The compose stack runs it as the `alert-receiver` service (so `docker compose logs alert-receiver` shows
every delivered alert), and tests/e2e runs the same file as the receiver Alertmanager delivers to.
Standard library only. Usage: ``python alert_receiver.py [--host H] [--port P]``; the first line on
stdout is ``alert receiver listening on http://HOST:PORT`` (``--port 0`` picks a free port).
Each alert line: ``{"receiver", "status", "alertname", "labels", "annotations", "startsAt"}``.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MAX_BODY = 4 * 1024 * 1024
_OUTPUT = threading.Lock()  # one request's lines are written together, never interleaved


def alert_lines(payload: dict[str, Any]) -> list[str]:
    """One JSON line per alert of an Alertmanager webhook payload (version 4)."""
    lines = []
    for alert in payload.get("alerts") or []:
        labels = alert.get("labels") or {}
        lines.append(json.dumps({
            "receiver": payload.get("receiver"), "status": alert.get("status"),
            "alertname": labels.get("alertname"), "labels": labels,
            "annotations": alert.get("annotations") or {}, "startsAt": alert.get("startsAt"),
        }, sort_keys=True))
    return lines


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        length = int(self.headers.get("Content-Length") or 0)
        if not 0 < length <= MAX_BODY:
            self.send_error(413 if length else 400, "expected a JSON body of at most 4 MiB")
            return
        try:
            payload = json.loads(self.rfile.read(length))
        except ValueError as exc:
            self.send_error(400, f"body is not JSON: {exc}")
            return
        if not isinstance(payload, dict):
            self.send_error(400, "body is not a JSON object")
            return
        lines = alert_lines(payload)
        with _OUTPUT:
            sys.stdout.write("".join(line + "\n" for line in lines))
            sys.stdout.flush()
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:  # keep stdout for alerts only
        return


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Print the alerts Alertmanager delivers, one JSON line each.")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=9095, help="TCP port; 0 picks a free one (default 9095)")
    args = parser.parse_args(argv)
    try:
        server = ThreadingHTTPServer((args.host, args.port), _Handler)
    except OSError as exc:
        print(f"alert receiver: cannot listen on {args.host}:{args.port}: {exc.strerror}", file=sys.stderr)
        return 2
    host, port = server.server_address[:2]
    print(f"alert receiver listening on http://{host}:{port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
