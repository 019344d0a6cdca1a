r"""One cluster's series out of a querier that holds several (Thanos, Mimir, VictoriaMetrics, or a
Prometheus federating each cluster's): every vector selector of a PromQL expression gets the
matcher `label="value"`, as prom-label-proxy enforces a tenant's (pure: strings in, strings out).

Written here, not taken from a library: promql-parser 0.11 (Rust, with Python bindings) parses
the portal's queries, but writing its tree back drops the escaping in strings (the matcher
`Hostname=~"a\\.b"` comes back as `"a\.b"`, which Prometheus refuses), and the node matchers
escape every dot of a node's name. The rewriter knows only what it must to find a selector;
everything else is copied as it came:

- a metric name is an identifier that is neither a keyword nor a function's name (followed by
  `(`); its matchers are the braces right after it, or none;
- braces anywhere else are a selector without a name (`{__name__=~"…"}`);
- the parentheses after `by`, `without`, `on`, `ignoring`, `group_left` and `group_right` hold
  label names, brackets hold durations (`[5m]`, `[7d:1m]`), and strings and comments hold
  anything: none of them is looked into.

The portal's own queries are what it rewrites, so a malformed one is a bug: it raises
ValueError rather than sending something else.
"""

from __future__ import annotations

import functools
import re

_TOKEN = re.compile(
    r"""
      (?P<space>\s+)
    | (?P<comment>\#[^\n]*)
    | (?P<string>"[^"\\]*(?:\\.[^"\\]*)*"|'[^'\\]*(?:\\.[^'\\]*)*'|`[^`]*`)
    | (?P<duration>(?:\d+(?:ms|[smhdwy]))+)(?![A-Za-z0-9_:])
    | (?P<number>0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
    | (?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)
    | (?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)
# Followed by a list of label names in parentheses (optional after group_left/group_right).
GROUPING = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})
# Never a metric name: operators, modifiers, number words, and the aggregations (which may
# be followed by `by`/`without` rather than by their parenthesis).
KEYWORDS = frozenset(
    {
        "and",
        "or",
        "unless",
        "atan2",
        "bool",
        "offset",
        "inf",
        "nan",
        "sum",
        "avg",
        "count",
        "min",
        "max",
        "group",
        "stddev",
        "stdvar",
        "topk",
        "bottomk",
        "count_values",
        "quantile",
        "limitk",
        "limit_ratio",
    }
)
_CLOSING = {"(": ")", "[": "]", "{": "}"}


def _tokens(promql: str) -> list[tuple[str, str]]:
    """(kind, text) of every token; kinds as _TOKEN's groups."""
    found = []
    for match in _TOKEN.finditer(promql):
        kind = match.lastgroup
        assert kind is not None  # `other` takes any one character
        found.append((kind, match.group()))
    return found


def _skip_space(tokens: list[tuple[str, str]], at: int) -> int:
    while at < len(tokens) and tokens[at][0] in ("space", "comment"):
        at += 1
    return at


def _closing(tokens: list[tuple[str, str]], at: int, promql: str) -> int:
    """The index of the token closing the bracket opened at `at` (strings skipped whole)."""
    opening = tokens[at][1]
    depth = 0
    for index in range(at, len(tokens)):
        kind, text = tokens[index]
        if kind != "other":
            continue
        if text == opening:
            depth += 1
        elif text == _CLOSING[opening]:
            depth -= 1
            if depth == 0:
                return index
    raise ValueError(f"unbalanced {opening!r} in PromQL: {promql[:200]}")


def _matchers(tokens: list[tuple[str, str]], at: int, end: int, matcher: str) -> str:
    """The braces from `at` to `end` with `matcher` first among theirs."""
    inside = "".join(text for _, text in tokens[at + 1 : end])
    return "{" + matcher + (", " + inside.strip() if inside.strip() else "") + "}"


@functools.lru_cache(maxsize=512)
def selecting(promql: str, label: str, value: str) -> str:
    """`promql` with `label="value"` on every vector selector (see the module's words)."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    matcher = f'{label}="{escaped}"'
    tokens = _tokens(promql)
    out: list[str] = []
    depth = 0  # of the parentheses the loop walks through (the skipped ones are checked)
    at = 0
    while at < len(tokens):
        kind, text = tokens[at]
        if kind == "ident":
            word = text.lower()
            after = _skip_space(tokens, at + 1)
            following = tokens[after][1] if after < len(tokens) else ""
            if word in GROUPING and following == "(":
                end = _closing(tokens, after, promql)
                out.extend(t for _, t in tokens[at : end + 1])
                at = end + 1
                continue
            if word in GROUPING or word in KEYWORDS or following == "(":
                out.append(text)  # a keyword, or a function's name
            elif following == "{":
                end = _closing(tokens, after, promql)
                out.append(text + _matchers(tokens, after, end, matcher))
                at = end + 1
                continue
            else:
                out.append(f"{text}{{{matcher}}}")
        elif kind == "other" and text == "{":
            end = _closing(tokens, at, promql)
            out.append(_matchers(tokens, at, end, matcher))
            at = end + 1
            continue
        elif kind == "other" and text == "[":
            end = _closing(tokens, at, promql)
            out.extend(t for _, t in tokens[at : end + 1])
            at = end + 1
            continue
        else:
            depth += {"(": 1, ")": -1}.get(text, 0) if kind == "other" else 0
            if depth < 0:
                break
            out.append(text)
        at += 1
    if depth:
        raise ValueError(f"unbalanced '(' in PromQL: {promql[:200]}")
    return "".join(out)
