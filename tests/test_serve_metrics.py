"""/metrics' request times (#60): counted in plain buckets on the scheduler's thread (zerollm.serve.metrics
._Latency) and turned into a histogram only when scraped; the text must be what prometheus-client's own
Histogram writes for the same observations, so a dashboard cannot tell the two apart."""

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from zerollm.serve.metrics import LATENCY_BUCKETS, _Latency

# on a bound (le is inclusive), between bounds, below the first, past the last, and zero
SECONDS = [0.001, 0.0005, 0.0025, 0.0026, 0.3, 1.0, 5.0, 299.9, 300.0, 1000.0, 0.0, 0.04]


def _samples(text):
    """{(name, labels): value} of every sample, the histogram's _created left out (a time, not a count)."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for family in text_string_to_metric_families(text)
            for s in family.samples if not s.name.endswith("_created")}


def test_plain_count_latencies_scrape_as_prometheus_client_histograms():
    reference = CollectorRegistry()
    histogram = Histogram("vllm:inter_token_latency_seconds", "doc", ["model_name"], buckets=LATENCY_BUCKETS,
                          registry=reference)
    latency = _Latency("vllm:inter_token_latency_seconds", "doc", "tang")
    for s in SECONDS:
        histogram.labels("tang").observe(s)
        latency.observe(s)

    class Collector:
        def collect(self):
            yield latency.family()
    ours = CollectorRegistry()
    ours.register(Collector())
    got, want = _samples(generate_latest(ours).decode()), _samples(generate_latest(reference).decode())
    assert got == want
    count = {k: v for k, v in got.items() if k[0].endswith("_count")}
    assert list(count.values()) == [len(SECONDS)]
    le_one = dict(got)[("vllm:inter_token_latency_seconds_bucket", (("le", "1.0"), ("model_name", "tang")))]
    assert le_one == sum(s <= 1.0 for s in SECONDS)
