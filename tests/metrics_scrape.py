"""Reading the portal's own /metrics in tests: scrape, parse with prometheus_client's own
parser (so the text format is checked too), and look up one sample."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
TOKEN = "metrics-token-for-the-tests-0123456789"


def parse(text: str) -> Samples:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sample `name` with exactly these labels; 0 when absent (a counter not yet
    incremented has no series)."""
    return samples.get((name, frozenset(labels.items())), 0.0)


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of every sample `name` whose labels include these."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= ls)


# Generous: a gunicorn worker that replaces a recycled one boots Django first, and a loaded
# machine makes that slow; the tests assert figures, not how fast they come.
REQUEST_TIMEOUT = 60


def scrape(url: str, token: str = TOKEN) -> Samples:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT) as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return parse(response.read().decode())
