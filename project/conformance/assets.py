"""Tiny binary test assets made in code: a 1x1 red PNG and a short silent WAV."""

from __future__ import annotations

import io
import struct
import wave
import zlib
from functools import cache

__all__ = ["png_pixel", "wav_silence"]


def _chunk(kind: bytes, data: bytes) -> bytes:
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)


@cache
def png_pixel() -> bytes:
    """A valid 1x1 PNG holding one opaque red pixel."""
    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)  # 1x1, 8-bit RGB
    scanline = b"\x00\xff\x00\x00"  # filter byte 0, then R G B
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(scanline))
        + _chunk(b"IEND", b"")
    )


@cache
def wav_silence(milliseconds: int = 100, rate: int = 8000) -> bytes:
    """A mono 16-bit PCM WAV file of silence."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(b"\x00\x00" * (rate * milliseconds // 1000))
    return buffer.getvalue()
