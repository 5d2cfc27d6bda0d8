"""Translate a DuckDB (RE2) regular expression into a Java pattern that matches the same strings.

Spark evaluates ``regexp_*`` and ``RLIKE`` with ``java.util.regex``; DuckDB with RE2. The two
agree on most syntax but not on what it means:

* ``\\d``, ``\\w``, ``\\s`` and ``\\b`` are ASCII in RE2; ``\\s`` also matches ``\\x0B`` in Java,
  and ``\\v`` is a single character in RE2 but a class of seven in Java;
* ``$`` is the end of the text in RE2, but also "before a final line terminator" in Java;
* ``.`` excludes only ``\\n`` in RE2, but also ``\\r``, ``\\u0085``, ``\\u2028``, ``\\u2029``
  in Java; ``(?i)`` folds Unicode case in RE2 and only ASCII in Java;
* ``&&`` and ``[`` inside a bracket class are operators in Java, literals in RE2.

So the pattern is parsed (a subset of RE2: everything a feature needs) and re-emitted with
explicit character classes, explicit anchors and the Java flags that make ``.`` and case folding
behave like RE2. Anything outside the subset (Unicode classes, POSIX classes, ``\\Q…\\E``,
group-local flags, ``U``) raises :class:`~autofe.errors.Untranspilable` rather than being
guessed at.
"""

from __future__ import annotations

import string
from collections.abc import Iterable
from dataclasses import dataclass

from autofe.errors import Untranspilable

WORD = "0-9A-Za-z_"
_CLASSES = {"d": "0-9", "w": WORD, "s": "\\t\\n\\f\\r "}
_CONTROL = {"n": 0x0A, "t": 0x09, "r": 0x0D, "f": 0x0C, "v": 0x0B, "a": 0x07}
_WORD_BOUNDARY = f"(?:(?<=[{WORD}])(?![{WORD}])|(?<![{WORD}])(?=[{WORD}]))"
_NOT_WORD_BOUNDARY = f"(?:(?<=[{WORD}])(?=[{WORD}])|(?<![{WORD}])(?![{WORD}]))"
_NOT_AFTER_WORD = f"(?<![{WORD}])"
_NOT_BEFORE_WORD = f"(?![{WORD}])"
_WORD_CHARS = frozenset(string.ascii_letters + string.digits + "_")  # what WORD spells
_PLAIN = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_ ,:;'\"%=<>@/~`!"
)
_CLASS_SPECIAL = frozenset("\\[]^-&")
MAX_REPEAT = 1000
"""RE2's largest counted repetition; a larger one is an error in DuckDB."""


@dataclass(frozen=True)
class JavaRegex:
    """A translated pattern and the facts about it the SQL rules need."""

    flags: str
    """The leading Java flag group, e.g. ``(?diu)``."""
    body: str
    groups: int
    """Capturing groups (named ones included): a group index past them is an error."""
    matches_empty: bool
    """The pattern can match the empty string: the engines resume differently after such a
    match, so global replace and extract-all refuse it."""
    optional_groups: frozenset[int]
    """Groups that can be left out of a match (under ``?``, ``*``, ``{0,n}`` or ``|``)."""
    anchored: bool
    """Every alternative starts at the beginning of the text, or every one ends at its end
    (and none matches empty): at most one match exists, so "first" and "all" agree."""

    @property
    def pattern(self) -> str:
        return self.flags + self.body


@dataclass(frozen=True)
class _Flags:
    ignore_case: bool = False
    multiline: bool = False
    dot_all: bool = False


@dataclass(frozen=True)
class _Piece:
    """Java text for part of the pattern, whether it can match the empty string, and whether
    it only matches at the beginning of the text."""

    java: str
    nullable: bool
    anchored: bool = False
    """Only matches at the beginning of the text."""
    at_end: bool = False
    """Only matches ending at the end of the text."""
    first: str | None = None
    """The characters a match can begin with, as the inside of a Java bracket class (empty for
    a piece that consumes nothing); None if unknown (``.``, a negated class, a case fold)."""
    alternatives: int = 1
    """Top-level alternatives (``a|b`` has two)."""


def re2_to_java(pattern: str, options: str = "") -> JavaRegex:
    """The Java pattern matching exactly what RE2 matches for ``pattern``.

    Args:
        pattern: the DuckDB regular expression.
        options: DuckDB's option letters: ``i`` (ignore case), ``c`` (case-sensitive) or ``g``
            (global, meaningful only to ``regexp_replace``, ignored here).

    Raises:
        Untranspilable: the pattern uses syntax outside the supported RE2 subset.

    >>> re2_to_java(r"local\\[(\\d+)").pattern
    '(?d)local\\\\[([0-9]+)'
    >>> re2_to_java(r"\\.0+$").pattern
    '(?d)\\\\.0+\\\\z'
    >>> re2_to_java("a*").matches_empty, re2_to_java("(a)(?:b)").groups
    (True, 1)
    """
    flags, start = _leading_flags(pattern, _option_flags(options, pattern))
    parser = _Parser(pattern, start, flags)
    body = parser.alternation()
    if parser.pos != len(pattern):
        parser.fail("unbalanced ')'")
    prefix = "(?d" + ("iu" if flags.ignore_case else "") + ("s" if flags.dot_all else "") + ")"
    optional = frozenset(parser.optional)
    single = body.anchored or (body.at_end and not body.nullable)
    java = body.java
    costly_start = body.alternatives > 1 or java.startswith(("(?:", "(?<", "(?=", "(?!"))
    if costly_start and body.first and not body.nullable and not body.anchored:
        # Java tries a match at every position; a look-around or several alternatives first
        # cost many tests where one class test rules most positions out
        java = f"(?=[{body.first}])(?:{java})"
    return JavaRegex(prefix, java, parser.groups, body.nullable, optional, single)


def _option_flags(options: str, pattern: str) -> _Flags:
    unknown = set(options) - set("icg")
    if unknown:
        raise Untranspilable(
            f"regular expression option(s) {''.join(sorted(unknown))!r} of {pattern!r} are not "
            "translated (only i, c and g are)"
        )
    if "i" in options and "c" in options:
        raise Untranspilable(f"regular expression options of {pattern!r} say both i and c")
    return _Flags(ignore_case="i" in options)


def _leading_flags(pattern: str, flags: _Flags) -> tuple[_Flags, int]:
    """``(?ims)`` at the very start sets flags for the whole pattern; elsewhere it is refused."""
    if not pattern.startswith("(?") or pattern[2:3] in (":", "P", "<", "=", "!"):
        return flags, 0
    end = pattern.find(")")
    letters = pattern[2:end] if end > 0 else ""
    if not letters or set(letters) - set("ims"):
        raise Untranspilable(f"regular expression flags {pattern[: end + 1]!r} are not translated")
    return (
        _Flags(
            ignore_case=flags.ignore_case or "i" in letters,
            multiline="m" in letters,
            dot_all="s" in letters,
        ),
        end + 1,
    )


class _Parser:
    """Recursive descent over RE2 syntax, emitting Java as it goes."""

    def __init__(self, pattern: str, start: int, flags: _Flags) -> None:
        self.text = pattern
        self.pos = start
        self.flags = flags
        self.groups = 0
        self.optional: set[int] = set()

    def fail(self, why: str) -> None:
        raise Untranspilable(f"regular expression {self.text!r}: {why} (at offset {self.pos})")

    def peek(self, ahead: int = 0) -> str:
        at = self.pos + ahead
        return self.text[at] if at < len(self.text) else ""

    def alternation(self) -> _Piece:
        first_group = self.groups
        branches = [self.concat()]
        while self.peek() == "|":
            self.pos += 1
            branches.append(self.concat())
        if len(branches) > 1:
            self.optional.update(range(first_group + 1, self.groups + 1))
        return _Piece(
            "|".join(b.java for b in branches),
            any(b.nullable for b in branches),
            all(b.anchored for b in branches),
            all(b.at_end for b in branches),
            _union(b.first for b in branches),
            len(branches),
        )

    def concat(self) -> _Piece:
        parts: list[_Piece] = []
        while self.peek() not in ("", "|", ")"):
            parts.append(self.repeat())
        if not self.flags.ignore_case:
            parts = _one_sided_boundaries(parts)
        anchored = bool(parts) and parts[0].anchored
        at_end = bool(parts) and parts[-1].at_end
        java = "".join(p.java for p in parts)
        return _Piece(java, all(p.nullable for p in parts), anchored, at_end, _first(parts))

    def repeat(self) -> _Piece:
        if self.peek() in ("*", "+", "?") or self._counted() is not None:
            self.fail("repetition without anything to repeat")
        first_group = self.groups
        atom = self.atom()
        quantifier, nullable = self._quantifier(atom)
        if quantifier and (self.peek() in ("*", "+") or self._counted() is not None):
            self.fail("a repetition of a repetition is an error in RE2")
        if quantifier and _may_skip(quantifier):
            self.optional.update(range(first_group + 1, self.groups + 1))
        bare = not quantifier
        return _Piece(
            atom.java + quantifier,
            nullable,
            atom.anchored and bare,
            atom.at_end and bare,
            atom.first,
        )

    def _quantifier(self, atom: _Piece) -> tuple[str, bool]:
        char = self.peek()
        if char in ("*", "+", "?"):
            self.pos += 1
            text, nullable = char, char != "+" or atom.nullable
        elif (counted := self._counted()) is not None:
            text, low = counted
            self.pos += len(text)
            nullable = low == 0 or atom.nullable
        else:
            return "", atom.nullable
        if self.peek() == "?":  # lazy
            self.pos += 1
            text += "?"
        return text, nullable

    def _counted(self) -> tuple[str, int] | None:
        """``{n}``, ``{n,}`` or ``{n,m}`` at the cursor; any other ``{`` is a literal in RE2."""
        if self.peek() != "{":
            return None
        end = self.text.find("}", self.pos)
        inner = self.text[self.pos + 1 : end] if end > 0 else ""
        low, _, high = inner.partition(",")
        if not low.isdigit() or (high and not high.isdigit()):
            return None
        if int(low) > MAX_REPEAT or (high and int(high) > MAX_REPEAT):
            self.fail(f"repetition count over {MAX_REPEAT}")
        if high and int(high) < int(low):
            self.fail("repetition {n,m} with m < n")
        return "{" + inner + "}", int(low)

    def atom(self) -> _Piece:
        char = self.peek()
        self.pos += 1
        if char == "(":
            return self.group()
        if char == "[":
            java = self.bracket()
            return _Piece(java, False, first=None if java.startswith("[^") else java[1:-1])
        if char == "\\":
            return self.escape()
        if char == ".":
            return _Piece(".", False)
        if char == "^":
            if self.flags.multiline:
                return _Piece("(?:\\A|(?<=\\n))", True, first="")
            return _Piece("\\A", True, anchored=True, first="")
        if char == "$":
            if self.flags.multiline:
                return _Piece("(?=\\n|\\z)", True, first="")
            return _Piece("\\z", True, at_end=True, first="")
        return self._literal_piece(char)

    def group(self) -> _Piece:
        capturing = True
        if self.peek() == "?":
            capturing = self._group_kind()
        if capturing:
            self.groups += 1
        inner = self.alternation()
        if self.peek() != ")":
            self.fail("missing ')'")
        self.pos += 1
        opener = "(" if capturing else "(?:"
        return _Piece(
            opener + inner.java + ")", inner.nullable, inner.anchored, inner.at_end, inner.first
        )

    def _group_kind(self) -> bool:
        """Consume ``?:`` or a group name; True if the group captures."""
        rest = self.text[self.pos :]
        if rest.startswith("?:"):
            self.pos += 2
            return False
        for opener in ("?P<", "?<"):
            name_end = rest.find(">")
            if rest.startswith(opener) and name_end > len(opener):
                name = rest[len(opener) : name_end]
                if not (name.isascii() and name.isalnum() and name[0].isalpha()):
                    self.fail(f"group name {name!r} is not valid in Java")
                self.pos += name_end + 1
                return True
        self.fail("only (?:...) and named groups are translated (no look-around, no local flags)")
        return False  # pragma: no cover - fail raises

    def escape(self) -> _Piece:
        char = self.peek()
        self.pos += 1
        if char in _CLASSES:
            return _Piece(f"[{_CLASSES[char]}]", False, first=_CLASSES[char])
        if char.lower() in _CLASSES:
            return _Piece(f"[^{_CLASSES[char.lower()]}]", False)
        if char in ("b", "B"):
            return _Piece(_WORD_BOUNDARY if char == "b" else _NOT_WORD_BOUNDARY, True, first="")
        if char in ("A", "z"):
            return _Piece("\\" + char, True, anchored=char == "A", at_end=char == "z", first="")
        return self._literal_piece(self._escaped_char(char))

    def _literal_piece(self, char: str) -> _Piece:
        """One literal character; what it begins with is unknown under ``(?i)`` (folding)."""
        first = None if self.flags.ignore_case else _class_literal(char)
        return _Piece(_literal(char), False, first=first)

    def _escaped_char(self, char: str) -> str:
        """The character ``\\<char>`` stands for (after a backslash, outside anchors/classes)."""
        if char in _CONTROL:
            return chr(_CONTROL[char])
        if char == "x":
            return self._hex()
        if char and not char.isalnum() and char.isascii():
            return char
        self.fail(f"escape \\{char} is not translated")
        return ""  # pragma: no cover - fail raises

    def _hex(self) -> str:
        if self.peek() == "{":
            end = self.text.find("}", self.pos)
            digits = self.text[self.pos + 1 : end] if end > 0 else ""
            self.pos = end + 1 if end > 0 else self.pos
        else:
            digits = self.text[self.pos : self.pos + 2]
            self.pos += 2
        try:
            return chr(int(digits, 16))
        except ValueError:
            self.fail(f"bad hexadecimal escape \\x{digits}")
            return ""  # pragma: no cover - fail raises

    def bracket(self) -> str:
        negated = self.peek() == "^"
        self.pos += int(negated)
        items: list[str] = []
        while True:
            char = self.peek()
            if char == "":
                self.fail("missing ']'")
            if char == "]" and items:
                self.pos += 1
                break
            items.append(self._class_item())
        return "[" + ("^" if negated else "") + "".join(items) + "]"

    def _class_item(self) -> str:
        if self.text.startswith("[:", self.pos):
            self.fail("POSIX classes like [:alpha:] are not translated")
        low = self._class_char()
        if low is None:  # \d, \w or \s: already a Java range list
            return _CLASSES[self.text[self.pos - 1]]
        if self.peek() == "-" and self.peek(1) not in ("]", ""):
            self.pos += 1
            high = self._class_char()
            if high is None or ord(high) < ord(low):
                self.fail("bad character range")
                return ""  # pragma: no cover - fail raises
            return _class_literal(low) + "-" + _class_literal(high)
        return _class_literal(low)

    def _class_char(self) -> str | None:
        """One character of a bracket class, or None for a ``\\d``/``\\w``/``\\s`` shorthand."""
        char = self.peek()
        self.pos += 1
        if char != "\\":
            return char
        escaped = self.peek()
        self.pos += 1
        if escaped in _CLASSES:
            return None
        if escaped.lower() in _CLASSES:
            self.fail(f"\\{escaped} inside a bracket class is not translated")
        return self._escaped_char(escaped)


def _may_skip(quantifier: str) -> bool:
    """Whether a quantifier allows zero repetitions.

    >>> _may_skip("*"), _may_skip("+"), _may_skip("{0,3}"), _may_skip("{2}?")
    (True, False, True, False)
    """
    return quantifier[0] in "*?" or quantifier.startswith(("{0}", "{0,"))


def _first(parts: list[_Piece]) -> str | None:
    """What a sequence's match can begin with: its pieces' up to the first that must consume."""
    for end, part in enumerate(parts, 1):
        if not part.nullable:
            return _union(p.first for p in parts[:end])
    return None  # the sequence can match empty, anywhere


def _union(firsts: Iterable[str | None]) -> str | None:
    """Class contents joined (each once); None if any is unknown."""
    known = list(firsts)
    return None if None in known else "".join(dict.fromkeys(f for f in known if f))


def _one_sided_boundaries(parts: list[_Piece]) -> list[_Piece]:
    """``\\b`` beside a literal word character as the one look-around that can still fail.

    Before ``j`` a boundary can only be "no word character before"; after ``n``, "none
    after": the same matches, but one character test per position tried instead of four,
    which Java's regex pays at every position of the text (a script parsed for the tables it
    names spent most of its time there). Only without ``(?i)``: folding Unicode case, Java
    matches ``k`` to the Kelvin sign, which is no ASCII word character.

    >>> [p.java for p in _one_sided_boundaries([_Piece(_WORD_BOUNDARY, True), _Piece("j", False)])]
    ['(?<![0-9A-Za-z_])', 'j']
    """
    out = list(parts)
    for i, part in enumerate(parts):
        if part.java != _WORD_BOUNDARY:
            continue
        if i + 1 < len(parts) and _word_literal(parts[i + 1]):
            out[i] = _Piece(_NOT_AFTER_WORD, True, first="")
        elif i > 0 and _word_literal(parts[i - 1]):
            out[i] = _Piece(_NOT_BEFORE_WORD, True, first="")
    return out


def _word_literal(part: _Piece) -> bool:
    """One literal ASCII word character, not optional: it is there whenever the match is."""
    return len(part.java) == 1 and part.java in _WORD_CHARS and not part.nullable


def _literal(char: str) -> str:
    """One literal character as Java pattern text.

    >>> _literal("a"), _literal("."), _literal("\\n")
    ('a', '\\\\.', '\\\\x{a}')
    """
    if char in _PLAIN or (not char.isascii() and char.isprintable()):
        return char
    if char.isprintable():
        return "\\" + char
    return f"\\x{{{ord(char):x}}}"


def _class_literal(char: str) -> str:
    if char in _CLASS_SPECIAL:
        return "\\" + char
    return char if char.isprintable() and char != " " else f"\\x{{{ord(char):x}}}"
