"""SQL text split into statements and parsed dialect by dialect, with readable errors."""

from __future__ import annotations

import re

import sqlglot
from sqlglot import TokenType, exp
from sqlglot.errors import ParseError, TokenError

from autofe.tools.profile_script.facts import _Facts
from autofe.tools.profile_script.models import _clip
from autofe.tools.profile_script.placeholders import _JINJA_BLOCK, _substitute_parameters
from autofe.tools.profile_script.sql_facts import _add_statement

_DIALECTS = ("spark", "databricks", "duckdb")


def _profile_sql_text(text: str, facts: _Facts) -> list[str]:
    """Add the facts of every statement that parses; return why the others did not."""
    if _JINJA_BLOCK.search(text):
        facts.warnings.append("template blocks {% ... %} were removed before parsing")
        text = _JINJA_BLOCK.sub(" ", text)
    sql = _substitute_parameters(text, facts.params)
    errors = []
    for line, chunk in _split_statements(sql):
        trees, error = _parse_chunk(chunk, line)
        if error:
            errors.append(facts.params.restore(error))
        for tree in trees:
            try:
                _add_statement(tree, facts, line)
            except RecursionError:
                facts.warnings.append(f"line {line}: statement nested too deeply to profile")
    return errors


def _split_statements(sql: str) -> list[tuple[int, str]]:
    """Statements with the line each starts on; semicolons in strings are kept.

    A statement is indented as far as it starts into its line, so error columns stay true.

    >>> _split_statements("select ';'; select 2;")
    [(1, "select ';'"), (1, '            select 2')]
    """
    try:
        tokens = sqlglot.tokenize(sql, read="spark")
    except (TokenError, ValueError):
        return [(1, sql)]
    chunks, start, first = [], 0, None
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            if first is not None:
                chunks.append((first, _indented(sql, start, token.start)))
            start, first = token.end + 1, None
        elif first is None:
            start, first = token.start, token.line
    if first is not None:
        chunks.append((first, _indented(sql, start, len(sql))))
    return chunks


def _indented(sql: str, start: int, end: int) -> str:
    column = start - (sql.rfind("\n", 0, start) + 1)
    return " " * column + sql[start:end]


def _parse_chunk(chunk: str, line: int) -> tuple[list[exp.Expr], str | None]:
    """Parse one statement, trying the dialects in turn; the first dialect's error is kept."""
    first_error = None
    for dialect in _DIALECTS:
        try:
            trees = [t for t in sqlglot.parse(chunk, read=dialect) if t is not None]
        except (ParseError, TokenError) as err:
            first_error = first_error or _error_text(err, line)
            continue
        except RecursionError:
            return [], f"line {line}: statement nested too deeply to parse"
        if trees and not any(_is_bare(t) for t in trees):
            return trees, None
        first_error = first_error or f"line {line}: not a SQL statement: {chunk.strip()}"
    return [], _clip(first_error or f"line {line}: could not parse")


def _is_bare(tree: exp.Expr) -> bool:
    """A lone expression (``hello world`` parses as ``hello AS world``) is not a statement."""
    return isinstance(tree, exp.Condition | exp.Alias | exp.Tuple | exp.Identifier)


_TOKEN_REPR = re.compile(r"<Token token_type: TokenType\.(\w+), text: (.*?), line: [^>]*>")


def _token_text(match: re.Match[str]) -> str:
    """sqlglot's ``<Token token_type: ..., text: x, ...>`` as a reader wants it: ``'x'``."""
    return "the end of the statement" if match[1] == "SENTINEL" else repr(match[2])


def _error_text(err: ParseError | TokenError, line: int) -> str:
    """``line L, col C: description`` with ``L`` counted in the whole script."""
    details = getattr(err, "errors", None) or [{}]
    info = details[0]
    description = _TOKEN_REPR.sub(_token_text, str(info.get("description") or str(err)))
    description = description.splitlines()[0] if description else "parse error"
    if info.get("line"):
        return f"line {info['line'] + line - 1}, col {info.get('col')}: {description}"
    return f"line {line}: {description}"
