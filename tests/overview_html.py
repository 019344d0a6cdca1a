"""Reading the overview's pool cards and their figures out of the page's HTML."""

from __future__ import annotations

import re


def card(html: str, pool: str) -> str:
    match = re.search(rf'<article class="card[^"]*" data-pool="{pool}">(.*?)</article>', html, re.S)
    assert match, f"no card for {pool}"
    return match.group(1)


def figure(html: str, name: str) -> str:
    match = re.search(rf'data-figure="{name}"[^>]*>([^<]*)<', html)
    assert match, f"no figure {name}"
    return match.group(1).strip()
