"""Which characters of a string from data may reach a terminal or a shell line raw.

Arguments, environment variables, ``summary.json`` fields, folder names and a rank's heartbeat may
hold characters that act instead of showing: control characters (a raw ESC recolours or retitles
the terminal, a newline forges a second line), format characters (a bidi override reorders what
follows), line and paragraph separators (``str.splitlines`` breaks on them) and the lone
surrogates Python uses for bytes of a file name that are not UTF-8 (a strict stdout cannot encode
them). The launcher refuses, quotes or escapes them, and a rank escapes them: one definition.
"""

from __future__ import annotations

import unicodedata

#: Characters that act instead of showing: control, format, line and paragraph separators.
CONTROL = frozenset({"Cc", "Cf", "Zl", "Zp"})
#: Never written raw to a terminal: :data:`CONTROL`, and surrogates (bytes that were not UTF-8).
UNPRINTABLE = CONTROL | {"Cs"}
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def has_control(text: str) -> bool:
    """True when ``text`` holds a character of :data:`CONTROL` (a surrogate-escaped byte is none)."""
    return not text.isprintable() and any(unicodedata.category(ch) in CONTROL for ch in text)


def escaped(ch: str) -> str:
    """One character as a Python literal writes it (``\\n``, ``\\u202e``); a surrogate escape as its byte."""
    if ch in _SHORT:
        return _SHORT[ch]
    code = ord(ch)
    if 0xDC80 <= code <= 0xDCFF:
        code -= 0xDC00
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable(value: object) -> str:
    """``str(value)`` with every :data:`UNPRINTABLE` character escaped (:func:`escaped`)."""
    text = str(value)
    if text.isprintable():  # the common case, and fast: no category lookups
        return text
    return "".join(escaped(ch) if unicodedata.category(ch) in UNPRINTABLE else ch for ch in text)
