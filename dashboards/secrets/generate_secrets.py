"""The compose stack's secrets, made on its first start by the `secrets-init` service (docker-compose.yml).

Each argument is `PATH=UID`: a secret file to create, readable by that user only (mode 0400). A file
that already holds a value is left as it is, so restarts and `docker compose up` again keep the same
token and password; delete the volume (`docker compose down -v`) to get new ones. Values are 32 random
bytes, URL-safe base64, with no trailing newline (the collector's bearertokenauth extension sends a
file's bytes as they are). Stdlib only: it runs in the plain Python image.
"""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path


def ensure_secret(path: Path, uid: int) -> bool:
    """Create `path` with a fresh random value owned by `uid` (mode 0400) unless it holds one; True if made."""
    if path.is_file() and path.stat().st_size > 0:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o400)
    with os.fdopen(fd, "w") as handle:
        handle.write(secrets.token_urlsafe(32))
    if os.geteuid() == 0:
        os.chown(tmp, uid, uid)
    os.replace(tmp, path)
    return True


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: generate_secrets.py PATH=UID ...", file=sys.stderr)
        return 2
    for arg in argv:
        path, sep, uid = arg.rpartition("=")
        if not sep or not path or not uid.isdigit():
            print(f"generate_secrets.py: {arg!r}: expected PATH=UID", file=sys.stderr)
            return 2
        made = ensure_secret(Path(path), int(uid))
        print(f"{path}: {'generated' if made else 'kept'}")  # never the value
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
