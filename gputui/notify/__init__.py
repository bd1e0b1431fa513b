"""Alert delivery: ``[[notify]]`` targets, their payloads and the worker that sends them.

:mod:`.events` turns analyses (alerts, findings), idle-policy notices and, later, faults into
one :class:`~gputui.notify.events.Event` type; :mod:`.payloads` writes the bodies receivers
understand; :mod:`.send` delivers one (an HTTP webhook through the bounded client, or a command
run with argv); :mod:`.worker` queues, deduplicates, rate-limits and retries on threads of its
own, so a hung receiver never holds a refresh back. docs/notify.md describes it all.
"""
