"""What a check returns: a :class:`Result` without id or subject, which the runner stamps.

A check says only what it found (status, summary, details, fix, docs); the id comes from its
registration (:func:`gputui.health.registry.check`) and the subject from what it was run on, so
neither can drift from the registry. :meth:`Result.to_check` is the one place a
:class:`HealthCheck` is made.
"""

from __future__ import annotations

from collections.abc import Sequence

from gputui.model.records import record
from gputui.model.status import HealthCheck, HealthStatus


@record(slots=False)
class Result:
    """One check's finding before it is tied to a check id and a subject.

    Attributes:
        status: pass/warn/fail/info/skip.
        summary: One line.
        details: What the check saw, one fact per line.
        fix: What to run or change, None when nothing needs doing.
        docs: A documentation URL, when one exists.
    """

    status: HealthStatus
    summary: str
    details: tuple[str, ...] = ()
    fix: str | None = None
    docs: str | None = None

    @classmethod
    def of(
        cls,
        status: HealthStatus,
        summary: str,
        *,
        details: Sequence[str] = (),
        fix: str | None = None,
        docs: str | None = None,
    ) -> Result:
        """A result with a status chosen at run time.

        Args:
            status: The outcome.
            summary: One line.
            details: Facts, one per line (a list or tuple, never a bare string).
            fix: What to do, if anything.
            docs: A documentation URL.

        Raises:
            TypeError: ``details`` is a string, which would become one line per character.
        """
        if isinstance(details, str):
            raise TypeError("details must be a sequence of lines, not one string")
        return cls(status=status, summary=summary, details=tuple(details), fix=fix, docs=docs)

    @classmethod
    def passed(
        cls,
        summary: str,
        *,
        details: Sequence[str] = (),
        fix: str | None = None,
        docs: str | None = None,
    ) -> Result:
        """A ``pass`` result (arguments as in :meth:`of`)."""
        return cls.of(HealthStatus.PASS, summary, details=details, fix=fix, docs=docs)

    @classmethod
    def info(
        cls,
        summary: str,
        *,
        details: Sequence[str] = (),
        fix: str | None = None,
        docs: str | None = None,
    ) -> Result:
        """An ``info`` result (arguments as in :meth:`of`)."""
        return cls.of(HealthStatus.INFO, summary, details=details, fix=fix, docs=docs)

    @classmethod
    def warn(
        cls,
        summary: str,
        *,
        details: Sequence[str] = (),
        fix: str | None = None,
        docs: str | None = None,
    ) -> Result:
        """A ``warn`` result (arguments as in :meth:`of`)."""
        return cls.of(HealthStatus.WARN, summary, details=details, fix=fix, docs=docs)

    @classmethod
    def fail(
        cls,
        summary: str,
        *,
        details: Sequence[str] = (),
        fix: str | None = None,
        docs: str | None = None,
    ) -> Result:
        """A ``fail`` result (arguments as in :meth:`of`)."""
        return cls.of(HealthStatus.FAIL, summary, details=details, fix=fix, docs=docs)

    @classmethod
    def skip(
        cls,
        summary: str,
        *,
        details: Sequence[str] = (),
        fix: str | None = None,
        docs: str | None = None,
    ) -> Result:
        """A ``skip`` result: the check could not judge (arguments as in :meth:`of`)."""
        return cls.of(HealthStatus.SKIP, summary, details=details, fix=fix, docs=docs)

    def to_check(self, check_id: str, subject: str | None = None) -> HealthCheck:
        """Stamp the id and subject on this result.

        Args:
            check_id: The registered id; per-subject checks get ``:<subject>`` appended.
            subject: The GPU index or container name the check judged, None for host checks.

        Returns:
            The :class:`HealthCheck` the front-ends show.
        """
        return HealthCheck(
            id=check_id if subject is None else f"{check_id}:{subject}",
            status=self.status,
            summary=self.summary,
            details=self.details,
            fix=self.fix,
            docs=self.docs,
            subject=subject,
        )
