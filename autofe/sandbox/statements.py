"""Statement screening before parsing: what the tokens alone show is not one read query.

The sandbox's first look at a statement (:func:`check_statements`), before any parse. It runs on
sqlglot's tokens, so it can word a refusal for text the parser cannot read. A statement that is no
query is named by its kind ("EXPORT DATABASE statements are not allowed: ...") even when sqlglot
cannot parse it: the kind is read from its leading keywords (:func:`statement_kind`), and only ever
to word the refusal. Look-alike punctuation (a full-width ``；``, curly quotes) outside strings,
quoted names and comments is named with its code point and offset before anything is parsed
(:data:`LOOKALIKES`). Passing proves nothing: :func:`~autofe.sandbox.guard.guard_sql` still parses
the statement and decides.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

import sqlglot
from sqlglot import Token, TokenType
from sqlglot.errors import SqlglotError

from autofe.errors import SandboxViolation

Span = tuple[int, int]

DIALECT = "duckdb"
MAX_SQL_CHARS = 200_000
"""Longer statements are refused before parsing: no feature query is this long."""


def check_statements(sql: str) -> None:
    """Refuse what the tokens alone show is not one query, without parsing the statement.

    For text the parser cannot read: several statements, look-alike punctuation, or a
    statement whose leading keywords name a kind that is not a query (``EXPORT DATABASE``,
    which sqlglot does not parse). Passing proves nothing:
    :func:`~autofe.sandbox.guard.guard_sql` still decides.

    Raises:
        SandboxViolation: with the reason and the offending span.

    >>> check_statements("EXPORT DATABASE 'dump' (FORMAT parquet)")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    autofe.errors.SandboxViolation: refused: EXPORT DATABASE statements are not allowed: ...
    >>> check_statements("SELECT (1")  # a parse error: nothing the tokens alone show
    """
    statement = statement_tokens(sql)
    kind = statement_kind(statement)
    if kind is not None:
        raise SandboxViolation(not_a_query(kind), sql, token_span(statement))


def check_characters(sql: str) -> None:
    """Refuse look-alike punctuation (``；`` for ``;``) outside strings, quoted names and comments.

    Raises:
        SandboxViolation: naming the character, its code point and offset (see
            :data:`LOOKALIKES`), or saying why the text cannot be tokenized.

    >>> check_characters("SELECT '；' AS a -- ；")
    >>> check_characters("SELECT 1；")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    autofe.errors.SandboxViolation: refused: character '；' (U+FF1B FULLWIDTH SEMICOLON) at ...
    """
    _check_lookalikes(sql, _tokenize(sql))


def statement_tokens(sql: str) -> list[Token]:
    """The tokens of the one statement in ``sql``, after the checks that need no parse.

    Raises:
        SandboxViolation: the text is too long, cannot be tokenized, holds look-alike
            punctuation, or holds no statement or more than one.

    >>> [t.text for t in statement_tokens("SELECT 1;")]
    ['SELECT', '1']
    """
    tokens = _checked_tokens(sql)
    _check_one_statement(sql, tokens)
    return _split_statements(tokens)[0]


def _checked_tokens(sql: str) -> list[Token]:
    if len(sql) > MAX_SQL_CHARS:
        raise SandboxViolation(f"statement longer than {MAX_SQL_CHARS} characters", sql)
    tokens = _tokenize(sql)
    _check_lookalikes(sql, tokens)
    return tokens


def _check_one_statement(sql: str, tokens: list[Token]) -> None:
    statements = _split_statements(tokens)
    if not statements:
        raise SandboxViolation("empty statement: no query to run", sql)
    if len(statements) > 1:
        raise SandboxViolation(
            f"only one statement is allowed, found {len(statements)}",
            sql,
            token_span(statements[1]),
        )


def _tokenize(sql: str) -> list[Token]:
    try:
        return list(sqlglot.Dialect.get_or_raise(DIALECT).tokenize(sql))
    except SqlglotError as exc:
        raise SandboxViolation(f"cannot tokenize as DuckDB SQL: {exc}", sql) from exc


def _split_statements(tokens: list[Token]) -> list[list[Token]]:
    """Tokens per statement; comments are not tokens, so ``/* ; */`` hides nothing here."""
    statements: list[list[Token]] = [[]]
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            statements.append([])
        else:
            statements[-1].append(token)
    return [s for s in statements if s]


LOOKALIKES: dict[str, str] = {
    **{
        chr(code): chr(code - 0xFEE0)
        for code in range(0xFF01, 0xFF5F)
        if not chr(code - 0xFEE0).isalnum()  # full-width forms of ASCII punctuation
    },
    "\u037e": ";",  # GREEK QUESTION MARK: drawn exactly like a semicolon
    "\u3001": ",",
    "\u3002": ".",
    "\uff61": ".",
    "\uff64": ",",
    "\ufe50": ",",
    "\ufe52": ".",
    "\ufe54": ";",
    "\ufe55": ":",
    "\ufe59": "(",
    "\ufe5a": ")",
    "\u2018": "'",
    "\u2019": "'",
    "\u2032": "'",
    "\u00b4": "'",
    "\u201c": '"',
    "\u201d": '"',
    "\u2033": '"',
    "\u2010": "-",
    "\u2011": "-",
    "\u2012": "-",
    "\u2013": "-",
    "\u2014": "-",
    "\u2212": "-",
    "\u2215": "/",
    "\u2044": "/",
    "\u2217": "*",
    "\u3008": "<",
    "\u3009": ">",
    "\u2264": "<=",
    "\u2265": ">=",
    "\u2260": "<>",
}
"""Characters an input method or a word processor puts where SQL punctuation belongs, with the
ASCII they stand for. Outside strings, quoted names and comments they are never what was meant:
DuckDB reads ``runs；`` as one table name and ``SELECT 1；`` as a column named ``；``."""

_QUOTED = frozenset(t for t in TokenType if t.name.endswith("STRING")) | {TokenType.IDENTIFIER}
"""Tokens whose text is data (strings, quoted names): any character may stand there."""


def _check_lookalikes(sql: str, tokens: Sequence[Token]) -> None:
    for token in tokens:
        if token.token_type in _QUOTED:
            continue
        text = sql[token.start : token.end + 1]
        found = next((i for i, ch in enumerate(text) if ch in LOOKALIKES), None)
        if found is not None:
            offset = token.start + found
            raise SandboxViolation(lookalike_reason(sql[offset], offset), sql, (offset, offset + 1))


def lookalike_reason(char: str, offset: int) -> str:
    """Why a look-alike character is refused: which one, where, and what to type instead.

    >>> lookalike_reason("\uff1b", 8)
    "character '；' (U+FF1B FULLWIDTH SEMICOLON) at offset 8: not SQL; use ';'"
    """
    named = f"{char!r} (U+{ord(char):04X} {unicodedata.name(char, 'unnamed character')})"
    return f"character {named} at offset {offset}: not SQL; use {LOOKALIKES.get(char, '')!r}"


_NOT_QUERY_WORDS = """
    abort alter analyze attach begin call checkpoint comment commit copy create deallocate
    delete describe detach drop end execute explain export force grant import insert install
    load merge pivot pragma prepare reset revoke rollback set show start summarize truncate
    uninstall unpivot update upsert use vacuum
"""
NOT_QUERY_KEYWORDS = frozenset(_NOT_QUERY_WORDS.split())
"""Leading keywords of DuckDB statements that are not read queries (``FROM x SELECT ...``,
``VALUES``, ``TABLE x`` and ``WITH`` start queries, and are absent on purpose)."""

_OBJECTS = frozenset(
    {"database", "function", "index", "macro", "schema", "secret", "sequence", "table", "type"}
    | {"view"}
)
_MODIFIERS = frozenset({"or", "replace", "temp", "temporary", "persistent", "unique"})
_SECOND_WORDS: dict[str, frozenset[str]] = {
    "export": frozenset({"database"}),
    "import": frozenset({"database"}),
    "force": frozenset({"install", "checkpoint"}),
    "create": _OBJECTS,
    "drop": _OBJECTS,
    "alter": _OBJECTS,
}


def statement_kind(tokens: Sequence[Token]) -> str | None:
    """The kind of statement its leading keywords name, if it is a kind that is no query.

    Read from tokens, so it names statements sqlglot cannot parse; only ever used to word a
    refusal, never to let anything through.

    >>> kind = lambda sql: statement_kind(sqlglot.Dialect.get_or_raise(DIALECT).tokenize(sql))
    >>> kind("EXPORT DATABASE 'x'"), kind("CREATE OR REPLACE TEMP VIEW v AS SELECT 1")
    ('EXPORT DATABASE', 'CREATE VIEW')
    >>> kind("COPY runs TO 'x'"), kind("SELECT 1"), kind("FROM runs SELECT 1")
    ('COPY', None, None)
    """
    words = [t.text.lower() if t.token_type not in _QUOTED else "" for t in tokens[:6]]
    if not words or words[0] not in NOT_QUERY_KEYWORDS:
        return None
    second = next((w for w in words[1:] if w not in _MODIFIERS), "")
    if second in _SECOND_WORDS.get(words[0], frozenset()):
        return f"{words[0]} {second}".upper()
    return words[0].upper()


def not_a_query(kind: str) -> str:
    """The refusal of a statement that is not a read query.

    >>> not_a_query("EXPORT DATABASE")
    'EXPORT DATABASE statements are not allowed: only one read query (SELECT / WITH) may run'
    """
    return f"{kind} statements are not allowed: only one read query (SELECT / WITH) may run"


def token_span(tokens: list[Token]) -> Span:
    """The ``(start, end)`` offsets ``tokens`` cover, for a refusal that names a statement."""
    return (tokens[0].start, tokens[-1].end + 1)
