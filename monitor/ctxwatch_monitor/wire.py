"""Reading an OTLP/HTTP request body safely: media type, content encoding and the size cap.

The cap applies to the *decompressed* size: gzip and deflate are inflated incrementally with a
bounded output, so a compression bomb costs at most `limit` bytes of memory before it is refused
with 413. Every problem is a `WireError` carrying the HTTP status the OTLP contract asks for.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator

PROTOBUF = "protobuf"
JSON = "json"

_MEDIA_TYPES = {
    "application/x-protobuf": PROTOBUF,
    "application/protobuf": PROTOBUF,
    "application/json": JSON,
}
# Content-Encoding -> zlib window bits (gzip header, zlib header); absent or identity -> None.
_ENCODINGS: dict[str, int | None] = {
    "": None,
    "identity": None,
    "gzip": 16 + zlib.MAX_WBITS,
    "x-gzip": 16 + zlib.MAX_WBITS,
    "deflate": zlib.MAX_WBITS,
}


class WireError(Exception):
    """A request refused before decoding: the HTTP status and a message saying what was wrong."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def media_encoding(content_type: str | None) -> str:
    """PROTOBUF or JSON for an OTLP content type (parameters such as charset ignored), else 415."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    try:
        return _MEDIA_TYPES[media]
    except KeyError:
        shown = media or "(none)"
        raise WireError(415, f"unsupported content type {shown}: send application/x-protobuf "
                             "or application/json") from None


def guess_encoding(content_type: str | None) -> str:
    """The encoding to answer an error in, even when the content type is not one we accept."""
    return JSON if "json" in (content_type or "").lower() else PROTOBUF


def _window_bits(content_encoding: str | None) -> int | None:
    name = (content_encoding or "").strip().lower()
    try:
        return _ENCODINGS[name]
    except KeyError:
        raise WireError(415, f"unsupported content encoding {name}: send gzip, deflate or identity") from None


def declared_length_ok(content_length: str | None, content_encoding: str | None, limit: int) -> None:
    """Refuse early (413) a body whose declared length is over the cap; 400 for a nonsense length."""
    if content_length is None:
        return
    try:
        length = int(content_length)
    except ValueError:
        raise WireError(400, f"Content-Length {content_length[:40]!r} is not a number") from None
    # a compressed body is never legitimately larger than the decompressed cap plus framing
    if length > limit + 1024:
        raise WireError(413, f"request body of {length} bytes is over the {limit}-byte limit")
    _window_bits(content_encoding)


async def read_body(chunks: AsyncIterator[bytes], content_encoding: str | None, limit: int) -> bytes:
    """Read and decompress the body, never holding more than `limit` decompressed bytes (413 past it)."""
    bits = _window_bits(content_encoding)
    raw_limit = limit + 1024
    parts: list[bytes] = []
    size = 0
    received = 0
    inflater = zlib.decompressobj(bits) if bits is not None else None
    async for chunk in chunks:
        received += len(chunk)
        if received > raw_limit:
            raise WireError(413, f"request body is over the {limit}-byte limit")
        piece = chunk if inflater is None else _inflate(inflater, chunk, limit - size)
        size += len(piece)
        if size > limit:
            raise WireError(413, f"request body is over the {limit}-byte limit once decompressed")
        if piece:
            parts.append(piece)
    if inflater is not None:
        if not inflater.eof:
            raise WireError(400, f"{content_encoding} body is truncated or not {content_encoding} data")
        if inflater.unused_data:
            raise WireError(400, f"{len(inflater.unused_data)} bytes of trailing data after the "
                                 f"{content_encoding} stream")
    return b"".join(parts)


def _inflate(inflater: zlib._Decompress, chunk: bytes, room: int) -> bytes:
    """Inflate one chunk, producing at most room + 1 bytes (one more than allowed means 413)."""
    if inflater.eof:
        if chunk:
            raise WireError(400, "trailing data after the compressed stream")
        return b""
    try:
        out = inflater.decompress(chunk, room + 1)
    except zlib.error as exc:
        raise WireError(400, f"body is not valid compressed data: {exc}") from None
    if inflater.unconsumed_tail:
        raise WireError(413, "request body is over the size limit once decompressed")
    return out
