"""Template parameters (``${x}``, ``{{ x }}``, ``:x``) swapped for identifiers sqlglot parses."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from sqlglot import exp

from autofe.tools.profile_script.models import _clip

_TOKEN_RE = re.compile(r"__autofe_p\d+__")


@dataclass
class _Params:
    """Template placeholders swapped for identifiers sqlglot can parse, and the way back."""

    displays: dict[str, str] = field(default_factory=dict)
    tokens: dict[str, str] = field(default_factory=dict)
    used: dict[str, None] = field(default_factory=dict)

    def token(self, display: str, *, parameter: bool = True) -> str:
        if parameter:
            self.used[_clip(display)] = None
        if display not in self.tokens:
            token = f"__autofe_p{len(self.tokens)}__"
            self.tokens[display] = token
            self.displays[token] = display
        return self.tokens[display]

    def display(self, token: str) -> str | None:
        return self.displays.get(token)

    def restore(self, text: str) -> str:
        return _TOKEN_RE.sub(lambda m: self.displays.get(m[0], m[0]), text)


_TEMPLATE = re.compile(
    r"(?P<skip>--[^\n]*|/\*.*?\*/)"
    r"|(?P<quoted>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|`[^`]*`)"
    r"|(?P<param>\$\{[^{}\n]{1,100}\}|\{\{[^{}\n]{1,100}\}\}|(?<![\w:]):[A-Za-z_]\w*)",
    re.S,
)
_INNER_PARAM = re.compile(r"\$\{[^{}\n]{1,100}\}|\{\{[^{}\n]{1,100}\}\}")
_JINJA_BLOCK = re.compile(r"\{%.*?%\}|\{#.*?#\}", re.S)


def _substitute_parameters(sql: str, params: _Params) -> str:
    """Swap ``${x}``, ``{{ x }}`` and ``:x`` for identifiers so the parser does not choke.

    ``:x`` only counts outside quotes and comments (times like ``'10:30'``, casts ``a::int``).

    >>> p = _Params()
    >>> _substitute_parameters("SELECT * FROM t WHERE ds = '{{ds}}' AND n > :n -- :no", p)
    "SELECT * FROM t WHERE ds = '__autofe_p0__' AND n > __autofe_p1__ -- :no"
    >>> list(p.used)
    ['{{ ds }}', ':n']
    """

    def swap(match: re.Match[str]) -> str:
        if match["skip"]:
            return match[0]
        if match["quoted"]:
            return _INNER_PARAM.sub(lambda m: params.token(_param_display(m[0])), match[0])
        return params.token(_param_display(match[0]))

    return _TEMPLATE.sub(swap, sql)


def _param_display(raw: str) -> str:
    if raw.startswith("{{"):
        return "{{ " + raw[2:-2].strip() + " }}"
    return raw


def _is_placeholder(node: exp.Expr) -> bool:
    return isinstance(node, exp.Column) and bool(_TOKEN_RE.fullmatch(node.name))
