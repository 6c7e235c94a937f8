"""The live page: `GET /` and its static assets (HTML, CSS, hand-written JS; no CDN, no build step).

The page polls the JSON API on its own and draws the fleet table and, for the selected loop, an
SVG chart of d_t against r_t with the onset marked. The assets hold no data and are served
without the token; the API calls they make carry it (read from `#token=` or asked for on 401).
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

STATIC = Path(__file__).with_name("static")


def mount_page(app: FastAPI) -> None:
    """Serve the page at / and its assets under /static/."""

    @app.get("/", include_in_schema=False)
    async def index() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html", headers={"Cache-Control": "no-cache"})

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
