"""Who a container belongs to: the person behind it, not the UID 0 its processes run as.

On a Docker host every container runs as root, so the user of its GPU processes names nobody.
The owner is found from the evidence an engine describes, strongest first, each with its
confidence (:data:`gputui.model.containers.OWNER_CONFIDENCES`):

1. **high**: a label naming the owner (the config's ``[owners] labels``, then
   ``gputui.owner``), or the user whose rootless engine runs the container (the owner of the
   engine's socket).
2. **medium**: the owner of the compose project's working directory (the label compose puts
   on each container), or a numeric non-root ``--user`` mapped through this host's users.
3. **low**: the owner of the container's bind-mount sources (the most common non-root one),
   or a ``--user`` name that this host also has.
4. **none**: every fact points at root: the owner is unknown, with the label to add.

Nothing here is exact but a label: the evidence line says what was used, and the hint how to
make it certain. Evidence owned by root is no evidence (root owns everything by default).

The filesystem and user-database reads (``lstat`` of a few paths, ``getpwuid``) run on a
daemon thread under a deadline: a hung network mount or a slow directory service costs a
read at most :data:`LOOKUP_DEADLINE_S`, after which the evidence not read yet is skipped.
"""

from __future__ import annotations

import os
import pwd
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence

from gputui.collect.linux.users import user_name
from gputui.model.containers import Owner
from gputui.model.records import record

#: The label gputui always reads (after the configured ones).
OWNER_LABEL = "gputui.owner"
#: Where compose records the project's directory on each container it creates.
COMPOSE_DIR_LABEL = "com.docker.compose.project.working_dir"
#: At most this many bind-mount sources are looked at.
MAX_BIND_SOURCES = 16
#: At most this many configured owner labels.
MAX_OWNER_LABELS = 8
#: How long the filesystem and user-database reads of one container may take together.
LOOKUP_DEADLINE_S = 0.5
#: After a lookup outran its deadline, lookups are skipped for this long.
SLOW_BACKOFF_S = 60.0
#: Bind sources under these belong to the system (sockets, devices, drivers), not a person.
SYSTEM_PREFIXES = (
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/lib",
    "/lib64",
    "/proc",
    "/run",
    "/sbin",
    "/sys",
    "/usr",
    "/var/lib",
    "/var/run",
)


@record
class OwnerFacts:
    """What an engine's description of one container says about its owner.

    Attributes:
        labels: ``(key, value)`` of the owner labels it carries, strongest first.
        compose_dir: The compose project's working directory (a host path).
        bind_sources: Host paths bind-mounted into it (at most :data:`MAX_BIND_SOURCES`).
        config_user: ``Config.User`` (``1000``, ``1000:1000``, ``alice``), None or ``""``
            when the image's default (root, as a rule) is used.
    """

    labels: tuple[tuple[str, str], ...] = ()
    compose_dir: str | None = None
    bind_sources: tuple[str, ...] = ()
    config_user: str | None = None


def owner_label_keys(configured: Sequence[str]) -> tuple[str, ...]:
    """The labels read for an owner, strongest first: the configured ones, then ``gputui.owner``."""
    keys = [k for k in configured[:MAX_OWNER_LABELS] if k and k != OWNER_LABEL]
    return (*dict.fromkeys(keys), OWNER_LABEL)


def _system_path(path: str) -> bool:
    return any(path == p or path.startswith(p + "/") for p in SYSTEM_PREFIXES)


def _uid_of_user(user: str | None) -> tuple[int | None, str | None]:
    """``Config.User`` as (numeric uid, None) or (None, user name); (None, None) when unset."""
    head = (user or "").split(":", 1)[0].strip()
    if not head:
        return None, None
    if head.isdigit() and len(head) <= 10:
        return int(head), None
    return None, head


class HostLookup:
    """The host's file owners and user names (injectable: tests use a fake user database)."""

    def path_uid(self, path: str) -> int | None:
        """The uid owning ``path`` (not following a final symlink); None when unreadable."""
        try:
            return os.lstat(path).st_uid
        except (OSError, ValueError):
            return None

    def user_name(self, uid: int) -> str | None:
        """The host's name for ``uid``; None when it has none."""
        return user_name(uid)

    def user_uid(self, name: str) -> int | None:
        """The host's uid for user ``name``; None when the host has no such user."""
        try:
            return pwd.getpwnam(name).pw_uid
        except (KeyError, UnicodeEncodeError, ValueError):
            return None


def _hint(label: str) -> str:
    return f"name the owner with a label: docker run --label {label}=<user>"


def _name(uid: int, lookup: HostLookup) -> str:
    return lookup.user_name(uid) or f"uid {uid}"


def _resolve(
    facts: OwnerFacts, engine_uid: int | None, hint_label: str, lookup: HostLookup
) -> Owner:
    for key, value in facts.labels:
        return Owner(value, "high", f"label {key}")
    hint = _hint(hint_label)
    if engine_uid:
        return Owner(
            _name(engine_uid, lookup), "high", f"runs on the rootless engine of uid {engine_uid}"
        )
    if facts.compose_dir:
        uid = lookup.path_uid(facts.compose_dir)
        if uid:
            name = _name(uid, lookup)
            evidence = f"owns the compose project's directory {facts.compose_dir}"
            return Owner(name, "medium", evidence, hint)
    user_uid, user_name = _uid_of_user(facts.config_user)
    if user_uid:
        name = _name(user_uid, lookup)
        return Owner(name, "medium", f"runs as --user {facts.config_user}", hint)
    owners: Counter[int] = Counter()
    first: dict[int, str] = {}
    for path in facts.bind_sources[:MAX_BIND_SOURCES]:
        if _system_path(path):
            continue
        uid = lookup.path_uid(path)
        if uid:
            owners[uid] += 1
            first.setdefault(uid, path)
    if owners:
        uid, count = owners.most_common(1)[0]
        more = f" and {count - 1} more" if count > 1 else ""
        return Owner(_name(uid, lookup), "low", f"owns its bind mount {first[uid]}{more}", hint)
    if user_name and user_name != "root":
        host_uid = lookup.user_uid(user_name)
        if host_uid:
            evidence = f"runs as --user {user_name}, a user of this host too"
            return Owner(user_name, "low", evidence, hint)
    return Owner(
        None,
        "none",
        "runs as root, and no label, rootless engine, compose directory, --user or bind "
        "mount names a person",
        hint,
    )


class OwnerResolver:
    """Resolves owners for one engine source, under a deadline per container.

    After a lookup outruns its deadline (a hung mount, a slow directory service), the lookups
    are skipped for :data:`SLOW_BACKOFF_S`: a source inspecting 200 new containers must not
    wait 200 deadlines.

    Args:
        label_keys: The owner labels, strongest first (:func:`owner_label_keys`).
        lookup: The host's file owners and users.
        deadline_s: How long one container's lookups may take.
        clock: Monotonic clock.
    """

    def __init__(
        self,
        label_keys: Sequence[str],
        *,
        lookup: HostLookup | None = None,
        deadline_s: float = LOOKUP_DEADLINE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label_keys = tuple(label_keys) or (OWNER_LABEL,)
        self._lookup = lookup or HostLookup()
        self._deadline_s = deadline_s
        self._clock = clock
        self._slow_until = 0.0

    def resolve(
        self, facts: OwnerFacts, *, engine_uid: int | None = None, budget_s: float | None = None
    ) -> Owner:
        """The owner of one container, from its facts (the chain in the module's docstring).

        Args:
            facts: What the engine said (:class:`OwnerFacts`).
            engine_uid: The user of a rootless engine (its socket's owner); None for a rootful
                one.
            budget_s: What is left of the caller's own deadline (the lookups take the smaller).

        Returns:
            The owner; never raises.
        """
        hint_label = self.label_keys[0]
        if facts.labels or not (
            engine_uid or facts.compose_dir or facts.bind_sources or facts.config_user
        ):
            return _resolve(facts, engine_uid, hint_label, self._lookup)  # no I/O to bound
        if self._clock() < self._slow_until:
            paused = "owner lookups paused: they were too slow"
            return Owner(None, "none", paused, _hint(hint_label))
        deadline = self._deadline_s
        if budget_s is not None:
            deadline = max(0.0, min(budget_s, deadline))
        found: list[Owner] = []

        def work() -> None:
            try:
                found.append(_resolve(facts, engine_uid, hint_label, self._lookup))
            except Exception as exc:  # a broken user database must not break the read
                found.append(Owner(None, "none", f"owner lookup failed: {type(exc).__name__}"))

        thread = threading.Thread(target=work, name="gputui-owner-lookup", daemon=True)
        thread.start()
        thread.join(deadline)
        if found:
            return found[0]
        self._slow_until = self._clock() + SLOW_BACKOFF_S
        return Owner(
            None,
            "none",
            f"the owner lookups (file owners, user names) took over {deadline:g} s",
            _hint(hint_label),
        )


def owner_facts_from_labels(
    labels: Mapping[str, object],
    keys: Iterable[str],
    *,
    text: Callable[[object], str | None],
) -> tuple[tuple[str, str], ...]:
    """``(key, value)`` of the owner labels present, in ``keys``' order.

    Args:
        labels: The container's labels.
        keys: The owner labels, strongest first (:func:`owner_label_keys`).
        text: The engine parser's bounded string reader (None for a non-string or empty).
    """
    out = []
    for key in keys:
        value = text(labels.get(key))
        if value and value.strip():
            out.append((key, value.strip()))
    return tuple(out)
