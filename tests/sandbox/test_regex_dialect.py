"""RE2 → Java regex translation: what each construct becomes, what is refused, and why.

Whether the Java pattern matches what RE2 matches is shown against both engines in
``tests/pipelines/test_spark.py`` (DuckDB's RE2 and Spark's java.util.regex).
"""

from __future__ import annotations

import pytest

from autofe.errors import Untranspilable
from autofe.sandbox.regex_dialect import WORD, re2_to_java

BOUNDARY = f"(?:(?<=[{WORD}])(?![{WORD}])|(?<![{WORD}])(?=[{WORD}]))"


@pytest.mark.parametrize(
    ("re2", "options", "java"),
    [
        # ASCII classes spelled out: Java's \s also matches \x0B
        (r"\d+\s\w", "", r"(?d)[0-9]+[\t\n\f\r ][0-9A-Za-z_]"),
        (r"\D\S\W", "", r"(?d)[^0-9][^\t\n\f\r ][^0-9A-Za-z_]"),
        (r"[\d.]+", "", "(?d)[0-9.]+"),
        # RE2's \b is an ASCII word boundary; Java's is Unicode-aware on some JDKs. Beside a
        # literal word character only one side can fail, so only that side is tested
        (r"\bjoin\b", "", rf"(?d)(?=[j])(?:(?<![{WORD}])join(?![{WORD}]))"),
        (r"(?i)\bjoin\b", "", f"(?diu){BOUNDARY}join{BOUNDARY}"),
        (r"\b(a)|a*\b|\b.", "", f"(?d){BOUNDARY}(a)|a*{BOUNDARY}|{BOUNDARY}."),
        (r"a?\bb", "", rf"(?d)a?(?<![{WORD}])b"),
        # $ is the end of the text in RE2, also "before a final newline" in Java
        (r"\.0+$", "", r"(?d)\.0+\z"),
        ("^a|b", "", r"(?d)(?=[ab])(?:\Aa|b)"),
        ("(?m)^a$", "", r"(?d)(?=[a])(?:(?:\A|(?<=\n))a(?=\n|\z))"),
        # a match that starts with look-arounds or alternatives is first ruled out by what it
        # can begin with (one class test per position); not with ., a negated class or (?i)
        (r"(?m)^\s*from", "", r"(?d)(?=[\t\n\f\r f])(?:(?:\A|(?<=\n))[\t\n\f\r ]*from)"),
        ("ab|c?d|[x-z]", "", "(?d)(?=[acdx-z])(?:ab|c?d|[x-z])"),
        ("a|.", "", "(?d)a|."),
        ("a|[^b]", "", "(?d)a|[^b]"),
        ("a|b*", "", "(?d)a|b*"),
        ("a|b", "i", "(?diu)a|b"),
        # (?d): . excludes only \n, as in RE2; (?iu): Unicode case folding, as in RE2
        ("(?i)a.b", "", "(?diu)a.b"),
        ("(?s)a.b", "", "(?ds)a.b"),
        ("x", "i", "(?diu)x"),
        # \v is one character in RE2, a class of seven in Java
        (r"a\vb\tc", "", r"(?d)a\x{b}b\x{9}c"),
        # && and [ are operators inside a Java class, literals in RE2
        ("[a&&b[]", "", r"(?d)[a\&\&b\[]"),
        ("a{b", "", r"(?d)a\{b"),
        ("a{2,3}?", "", "(?d)a{2,3}?"),
        # a named group is numbered like any other in both: the name is dropped
        ("(?P<day>[0-9]{2})", "", "(?d)([0-9]{2})"),
        (r"\x41\x{263a}", "", "(?d)A☺"),
        ("é+", "", "(?d)é+"),
    ],
)
def test_translation(re2: str, options: str, java: str) -> None:
    assert re2_to_java(re2, options).pattern == java


@pytest.mark.parametrize(
    ("re2", "options", "why"),
    [
        (r"\pL", "", r"escape \\p"),
        ("[[:alpha:]]", "", "POSIX classes"),
        ("(?=a)", "", "look-around"),
        ("a(?i:b)", "", "look-around, no local flags"),
        ("a(?i)b", "", "look-around, no local flags"),
        ("(?U)a*", "", "flags"),
        (r"(a)\1", "", r"escape \\1"),
        ("a**", "", "repetition of a repetition"),
        ("*a", "", "without anything to repeat"),
        ("a{1001}", "", "over 1000"),
        ("(a", "", "missing '\\)'"),
        ("a)", "", "unbalanced"),
        ("[a", "", "missing '\\]'"),
        ("[z-a]", "", "bad character range"),
        ("a", "x", "option"),
        ("a", "ic", "both i and c"),
    ],
)
def test_refusal(re2: str, options: str, why: str) -> None:
    with pytest.raises(Untranspilable, match=why):
        re2_to_java(re2, options)


def test_facts_the_sql_rules_use() -> None:
    regex = re2_to_java("(a)(b)?|(c)")
    assert regex.groups == 3
    assert regex.optional_groups == {1, 2, 3}
    assert not regex.matches_empty
    assert re2_to_java("(a)(b)").optional_groups == frozenset()
    assert re2_to_java("(x)*").matches_empty
    assert re2_to_java(r"^a|\Ab").anchored
    assert not re2_to_java("^a|b").anchored
