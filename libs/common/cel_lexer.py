"""The tokens of a CEL expression, as cel-go's lexer (`parser/gen/cel_lexer.go`, generated
from the grammar `parser/gen/CEL.g4`) reads them: numbers, string and bytes literals decoded as
cel-go's `unescape` does, identifiers, escaped field names and punctuation.
`drasim.common.cel_ast` parses them.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Iterator
from dataclasses import dataclass

__all__ = ["RESERVED", "CELSyntaxError", "Token", "tokens"]


class CELSyntaxError(ValueError):
    """The text is not a CEL expression this parser understands; `offset` is where."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(f"{message} (at offset {offset})")
        self.offset = offset


@dataclass(frozen=True, slots=True)
class Token:
    """One token; `value` is a literal's, decoded."""

    kind: str  # "int", "uint", "double", "string", "bytes", "ident", "punct" or "end"
    text: str
    offset: int
    value: int | float | str | bytes | None = None


_TOKEN = re.compile(
    r"""
    (?P<space>(?:[\t\n\f\r ]+|//[^\n]*)+)
  | (?P<double>\d+\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\.\d+(?:[eE][+-]?\d+)?)
  | (?P<uint>(?:0x[0-9a-fA-F]+|\d+)[uU])
  | (?P<int>0x[0-9a-fA-F]+|\d+)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<escaped>`[A-Za-z0-9_./\- ]+`)
  | (?P<punct>==|!=|<=|>=|&&|\|\||[<>!+\-*/%?:.,\[\](){}])
    """,
    re.VERBOSE,
)
# String and bytes literals are read by `_string`. `b` comes before `r` (`BYTES: 'b' STRING`).
_STRING_PREFIX = re.compile(r"[bB][rR]|[bB]|[rR]")
# Words the grammar reserves: never an identifier.
RESERVED = frozenset(
    {
        "as", "break", "const", "continue", "else", "for", "function", "if", "import", "let",
        "loop", "package", "namespace", "return", "var", "void", "while",
    }
)  # fmt: skip
_SIMPLE_ESCAPES = {
    "a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
    "\\": "\\", "'": "'", '"': '"', "`": "`", "?": "?",
}  # fmt: skip


def tokens(text: str) -> Iterator[Token]:
    """The tokens of `text` up to an "end" token, or `CELSyntaxError` where none is."""
    pos = 0
    while pos < len(text):
        prefix = _STRING_PREFIX.match(text, pos)
        quote_at = prefix.end() if prefix else pos
        if text.startswith(("'", '"'), quote_at):
            token, pos = _string(text, pos, prefix.group() if prefix else "")
            yield token
            continue
        match = _TOKEN.match(text, pos)
        if match is None:
            raise CELSyntaxError(f"token recognition error at: '{text[pos]}'", pos)
        kind = match.lastgroup
        assert kind is not None
        word = match.group()
        if kind == "int":
            yield Token("int", word, pos, int(word, 16) if word.startswith("0x") else int(word))
        elif kind == "uint":
            digits = word[:-1]
            yield Token("uint", word, pos, int(digits, 16) if "x" in digits else int(digits))
        elif kind == "double":
            yield Token("double", word, pos, float(word))
        elif kind == "escaped":
            yield Token("escaped", word, pos, word[1:-1])
        elif kind != "space":
            yield Token(kind, word, pos)
        pos = match.end()
    yield Token("end", "<EOF>", len(text))


def _string(text: str, start: int, prefix: str) -> tuple[Token, int]:
    """A string or bytes literal starting at `start`, decoded as cel-go's `unescape`."""
    is_bytes = "b" in prefix.lower()
    is_raw = "r" in prefix.lower()
    pos = start + len(prefix)
    quote = text[pos : pos + 3] if text.startswith(('"""', "'''"), pos) else text[pos]
    pos += len(quote)
    out: list[str] = []
    raw_bytes = bytearray()

    def emit(char: str, *, byte: int | None = None) -> None:
        if is_bytes:
            raw_bytes.extend(char.encode() if byte is None else bytes([byte]))
        else:
            out.append(char)

    while True:
        if text.startswith(quote, pos):
            pos += len(quote)
            break
        if pos >= len(text) or (len(quote) == 1 and text[pos] in "\r\n"):
            raise CELSyntaxError("token recognition error: unterminated string", start)
        char = text[pos]
        if char == "\r":  # cel-go normalizes newlines to \n
            pos += 2 if text.startswith("\r\n", pos) else 1
            emit("\n")
            continue
        if char != "\\" or is_raw:
            emit(char)
            pos += 1
            continue
        pos = _escape(text, pos, is_bytes, emit)
    value: str | bytes = bytes(raw_bytes) if is_bytes else "".join(out)
    return Token("bytes" if is_bytes else "string", text[start:pos], start, value), pos


def _escape(text: str, pos: int, is_bytes: bool, emit: Callable[..., None]) -> int:
    """One escape sequence at `pos` (the backslash); where the text continues."""
    code = text[pos + 1 : pos + 2]
    if code in _SIMPLE_ESCAPES:
        emit(_SIMPLE_ESCAPES[code])
        return pos + 2
    digits = {"x": 2, "X": 2, "u": 4, "U": 8}.get(code)
    if digits is not None:
        hex_digits = text[pos + 2 : pos + 2 + digits]
        valid = len(hex_digits) == digits and all(c in string.hexdigits for c in hex_digits)
        if not valid or (is_bytes and code in "uU"):
            raise CELSyntaxError("invalid escape sequence", pos)
        value = int(hex_digits, 16)
        if is_bytes:
            emit("", byte=value)
        else:
            emit(_code_point(value, pos))
        return pos + 2 + digits
    octal = text[pos + 1 : pos + 4]
    if re.fullmatch(r"[0-3][0-7][0-7]", octal):
        value = int(octal, 8)
        if is_bytes:
            emit("", byte=value)
        else:
            emit(_code_point(value, pos))
        return pos + 4
    raise CELSyntaxError("invalid escape sequence", pos)


def _code_point(value: int, pos: int) -> str:
    if value > 0x10FFFF or 0xD800 <= value <= 0xDFFF:
        raise CELSyntaxError("invalid unicode code point", pos)
    return chr(value)
