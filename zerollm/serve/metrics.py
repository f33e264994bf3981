"""What the server is doing, for an operator: GET /metrics in Prometheus' text format (prometheus-client).

    metrics = Metrics(backend.scheduler, model_name="tang")
    metrics.watch(reqs)            # before they are submitted: times each request from now on
    metrics.taken(reqs)            # once the scheduler took them: their prompt tokens
    body = metrics.render()        # the text a Prometheus server scrapes

The names are vLLM's own (docs.vllm.ai, "Production metrics"), so a dashboard made for vLLM reads
zerollm unchanged; each carries the label model_name:

    vllm:num_requests_running / _waiting          gauges: rows decoding; queued or being prefilled
    vllm:kv_cache_usage_perc                      gauge: tokens held by the rows' caches / (max_batch * context)
    vllm:prompt_tokens_total                      counters: prompt tokens of the requests taken,
    vllm:generation_tokens_total                  tokens generated (a stop id included, as usage counts it)
    vllm:request_success_total{finished_reason}   requests ended: stop, length, cancelled, error
    vllm:time_to_first_token_seconds              histograms: submit -> first token,
    vllm:time_per_output_token_seconds            each request's (end - first token) / (tokens - 1),
    vllm:inter_token_latency_seconds              the time between two tokens of one request,
    vllm:e2e_request_latency_seconds              submit -> done
    vllm:prefix_cache_queries_total / _hits_total counters: prompt tokens looked up / found in the prefix cache
    vllm:spec_decode_num_draft_tokens_total       counters: tokens guessed / guesses kept (speculation);
    vllm:spec_decode_num_accepted_tokens_total    acceptance rate = accepted / draft

The counters of the scheduler (prefix cache, speculation, rows) are read when scraped; the times are
taken on the scheduler's thread as each request's events are emitted, into plain bucket counts (_Latency)
that become prometheus-client histograms only when scraped: a Histogram's labels() and observe() cost
about 9 µs a token there, on the thread every stream waits for, where a count costs under 1.
"""

import bisect
import threading
import time

from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.utils import floatToGoString

from zerollm.generation.batching import Done, Token

CONTENT_TYPE = CONTENT_TYPE_LATEST
# seconds; from a tiny model's milliseconds to a long answer's minutes
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


class Metrics:
    """The registry behind /metrics for one served model."""

    def __init__(self, scheduler, model_name):
        self.registry, self.name = CollectorRegistry(), model_name
        r, label = self.registry, ["model_name"]
        self.prompt_tokens = Counter("vllm:prompt_tokens", "Prompt tokens of the requests taken.", label, registry=r)
        self.generation_tokens = Counter("vllm:generation_tokens", "Tokens generated.", label, registry=r)
        self.finished = Counter("vllm:request_success", "Requests ended, by finish reason.",
                                label + ["finished_reason"], registry=r)
        self.ttft, self.tpot, self.itl, self.e2e = (
            _Latency(name, doc, model_name) for name, doc in (
                ("vllm:time_to_first_token_seconds", "Seconds from submit to the first token."),
                ("vllm:time_per_output_token_seconds", "Per request: seconds from its first token to its end "
                                                       "over its tokens after the first."),
                ("vllm:inter_token_latency_seconds", "Seconds between two tokens of one request."),
                ("vllm:e2e_request_latency_seconds", "Seconds from submit to the end of a request.")))
        r.register(_Scheduler(scheduler, model_name))
        r.register(_Histograms((self.ttft, self.tpot, self.itl, self.e2e)))

    def watch(self, reqs):
        """Time ``reqs`` (scheduler Requests, not yet submitted): each emit is wrapped."""
        for req in reqs:
            req.emit = _Timed(self, req.emit, req)

    def taken(self, reqs):
        """Count the prompt tokens of ``reqs`` once the scheduler took them (a refused request counts nothing)."""
        self.prompt_tokens.labels(self.name).inc(sum(len(r.prompt) for r in reqs))

    def render(self):
        return generate_latest(self.registry)


class _Timed:
    """A request's emit with its times observed on the way (called on the scheduler's thread)."""

    def __init__(self, metrics, emit, req):
        self.metrics, self.emit, self.req = metrics, emit, req
        self.start = self.last = time.perf_counter()
        self.first = None

    def __call__(self, ev):
        now, m = time.perf_counter(), self.metrics
        token = type(ev) is Token
        if token or (self.first is None and self.req.ids and isinstance(ev, Done)):
            if self.first is None:
                self.first = now
                m.ttft.observe(now - self.start)
            elif token:
                m.itl.observe(now - self.last)
            self.last = now
        if not token and isinstance(ev, Done):
            n, name = len(self.req.ids), m.name
            m.generation_tokens.labels(name).inc(n)
            m.finished.labels(name, ev.reason).inc()
            m.e2e.observe(now - self.start)
            if n > 1 and self.first is not None:
                m.tpot.observe((now - self.first) / (n - 1))
        self.emit(ev)


class _Latency:
    """One histogram of seconds as plain counts per bucket of LATENCY_BUCKETS (observed on the scheduler's
    thread), read into a HistogramMetricFamily at a scrape (_Histograms)."""

    def __init__(self, name, doc, model_name):
        self.name, self.doc, self.model_name = name, doc, model_name
        self.counts = [0] * (len(LATENCY_BUCKETS) + 1)      # the last: above every bound (+Inf's own)
        self.sum = 0.0
        self.lock = threading.Lock()          # a scrape reads counts and sum of one moment

    def observe(self, seconds):
        i = bisect.bisect_left(LATENCY_BUCKETS, seconds)    # Prometheus' le: the first bound >= seconds
        with self.lock:
            self.counts[i] += 1
            self.sum += seconds

    def family(self):
        with self.lock:
            counts, total = list(self.counts), self.sum
        cumulative, buckets = 0, []
        for bound, n in zip((*LATENCY_BUCKETS, float("inf")), counts):
            cumulative += n
            buckets.append((floatToGoString(bound), cumulative))
        h = HistogramMetricFamily(self.name, self.doc, labels=["model_name"])
        h.add_metric([self.model_name], buckets, total)
        return h


class _Histograms:
    """A custom collector: the request times (_Latency), read at each scrape."""

    def __init__(self, latencies):
        self.latencies = latencies

    def collect(self):
        for latency in self.latencies:
            yield latency.family()


class _Scheduler:
    """A custom collector: the scheduler's own numbers, read at each scrape."""

    def __init__(self, scheduler, name):
        self.s, self.name = scheduler, name

    def collect(self):
        s, label = self.s, [self.name]
        for metric, doc, value in (
                ("vllm:num_requests_running", "Requests whose rows are decoding.", len(s.rows)),
                ("vllm:num_requests_waiting", "Requests queued or having their prompt prefilled.",
                 len(s.waiting) + len(s.joining)),
                ("vllm:kv_cache_usage_perc", "Tokens in the rows' KV caches over max_batch times the context "
                                             "(1 = full).", _kv_usage(s))):
            g = GaugeMetricFamily(metric, doc, labels=["model_name"])
            g.add_metric(label, value)
            yield g
        queries, hits = (s.prefix.queries, s.prefix.hits) if s.prefix is not None else (0, 0)
        for metric, doc, value in (
                ("vllm:prefix_cache_queries", "Prompt tokens looked up in the prefix cache.", queries),
                ("vllm:prefix_cache_hits", "Prompt tokens found in the prefix cache.", hits),
                ("vllm:spec_decode_num_draft_tokens", "Tokens guessed by speculative decoding.", s.drafted),
                ("vllm:spec_decode_num_accepted_tokens", "Guessed tokens kept.", s.accepted)):
            c = CounterMetricFamily(metric, doc, labels=["model_name"])
            c.add_metric(label, value)
            yield c


def _kv_usage(s):
    pos = s.shared.cache.pos                   # (A,) each row's tokens; replaced, never resized, by the step
    return float(pos.sum()) / (s.max_batch * s.cfg.block_size)
