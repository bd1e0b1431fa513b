"""``gputui fleet``: an overview of many GPU hosts, read from Prometheus's HTTP query API.

The fleet view grows no agents of its own: every figure comes from PromQL over ``/api/v1/query``
and ``/api/v1/query_range`` of a Prometheus (or what speaks its API: Thanos, Mimir,
VictoriaMetrics) that scrapes ``gputui export`` or dcgm-exporter on each host.

Modules: ``client`` (the bounded HTTP client and its one-sentence errors), ``queries`` (the
PromQL: a fixed set of instant queries, none per host), ``model`` (answers → frozen host rows),
``source`` (live or recorded answers), ``report`` (``--once`` / ``--json``), ``command``.
"""
