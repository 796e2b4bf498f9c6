"""Django models of rivet_workflows: actors, their workflow history, queue messages and cron entries.

Values in JSON columns hold ``engine.serde.to_json`` output (tagged JSON); read them through
the stores of ``rivet_workflows.storage`` (or ``serde.from_json``) to get Python values back.
DESIGN.md section 4.
"""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import F, Q


def new_actor_id() -> str:
    """Return a fresh actor id: a uuid4 as 32 lowercase hex characters."""
    return uuid.uuid4().hex


class Actor(models.Model):
    """One actor: identity (name + key), state, workflow status, wake-up and lease.

    ``key`` is a JSON list of strings; ``key_text`` is its canonical JSON text, unique with ``name``
    (destroying an actor deletes its rows, so the key can be used again; ``destroyed`` is reserved).
    ``wake_at`` is NULL once the workflow is finished; an actor is due when ``wake_at <= now`` (database
    clock) and its lease is free or expired. ``lease_token`` is the fencing counter bumped by every claim.
    """

    actor_id = models.CharField(primary_key=True, max_length=32, default=new_actor_id, editable=False)
    name = models.CharField(max_length=200)
    key = models.JSONField(default=list)
    key_text = models.TextField()
    state = models.JSONField(null=True, blank=True)
    input = models.JSONField(null=True, blank=True)
    output = models.JSONField(null=True, blank=True)
    error = models.JSONField(null=True, blank=True)
    workflow_state = models.CharField(max_length=20, default="pending", db_index=True)
    wake_at = models.DateTimeField(null=True, blank=True)
    waiting_for = models.JSONField(default=list, blank=True)
    lease_owner = models.CharField(max_length=200, null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    lease_token = models.BigIntegerField(default=0)
    replay_generation = models.PositiveIntegerField(default=0)
    step_lock_until = models.DateTimeField(null=True, blank=True)
    destroyed = models.BooleanField(default=False)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    # The code version (RIVET_WORKFLOWS["CODE_VERSION"]) of the last run commit, and the one the run waits
    # for after a worker of another version left it during a rolling deploy (DESIGN.md section 12).
    code_version = models.CharField(max_length=200, null=True, blank=True)
    awaiting_code_version = models.CharField(max_length=200, null=True, blank=True)
    #: the W3C trace context (``{"traceparent": ...}``) of the request that created the actor: its runs join
    #: that trace (DESIGN.md section 14); None when no tracing was active
    trace_context = models.JSONField(null=True, blank=True)
    # Flow controls recorded at creation (DESIGN.md section 12). ``concurrency_key`` is the group sharing
    # the limits (NULL: none); a claim counts the group's live leases (``concurrency_limit``) and its run
    # starts in the last ``rate_per`` seconds (``FlowStart``, ``rate_count``).
    concurrency_key = models.TextField(null=True, blank=True)
    concurrency_limit = models.IntegerField(null=True, blank=True)
    rate_count = models.IntegerField(null=True, blank=True)
    rate_per = models.FloatField(null=True, blank=True)
    priority = models.IntegerField(default=0)
    #: the workflow's timeout as an instant (creation + timeout, database clock)
    deadline_at = models.DateTimeField(null=True, blank=True)
    #: set while an operator has paused the actor (it is never claimed then)
    paused_at = models.DateTimeField(null=True, blank=True)
    pause_reason = models.TextField(null=True, blank=True)
    #: the actor whose run created this one (a step's ``step.client()``, ``ctx.spawn``); NULL: created from
    #: outside a run (DESIGN.md section 20). A plain id, not a foreign key: a child outlives its parent's rows
    parent_actor_id = models.CharField(max_length=32, null=True, blank=True, db_index=True)

    #: search attributes (``ctx.set_attributes``): a flat JSON object of scalars, filtered by the listings
    #: and bulk actions (DESIGN.md section 19); jsonb with a GIN index on PostgreSQL (migration 0014)
    attributes = models.JSONField(default=dict, blank=True, db_default=models.Value({}, models.JSONField()))

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["name", "key_text"], name="rivet_actor_name_key_uniq"),
        ]
        indexes = [
            # The sweep: wake_at <= now AND (lease_expires_at IS NULL OR lease_expires_at < now),
            # ORDER BY wake_at. Finished actors (wake_at NULL) are not in the index at all.
            models.Index(
                fields=["wake_at", "lease_expires_at"],
                name="rivet_actor_due_idx",
                condition=Q(wake_at__isnull=False),
            ),
            models.Index(fields=["name", "workflow_state"], name="rivet_actor_name_state_idx"),
            # listings and bulk actions page by (created_at, actor_id) (DESIGN.md section 19)
            models.Index(fields=["created_at", "actor_id"], name="rivet_actor_created_idx"),
            # claim_due's order for the actors with a priority (the rest come by wake_at, rivet_actor_due_idx):
            # highest priority first, then earliest wake_at; partial, so sleepers of priority 0 cost nothing
            models.Index(
                F("priority").desc(),
                "wake_at",
                name="rivet_actor_prio_due_idx",
                condition=Q(wake_at__isnull=False) & ~Q(priority=0),
            ),
            # a claim of a limited actor counts the live leases of its group
            models.Index(
                fields=["name", "concurrency_key", "lease_expires_at"],
                name="rivet_actor_flow_idx",
                condition=Q(concurrency_key__isnull=False, lease_owner__isnull=False),
            ),
        ]
        permissions = [
            ("replay_workflow", "Can replay and recover workflows"),
            # the actor API (create, read, list, call actions, send): rivet_workflows.access
            ("use_actor_api", "Can use the actor API (create, read, call actions, send messages)"),
        ]

    def __str__(self) -> str:
        return f"{self.name}{self.key} ({self.actor_id})"


class HistoryEntry(models.Model):
    """One workflow history entry (ENGINE-SEMANTICS.md section 1); ``id`` is its creation order (seq)."""

    id = models.BigAutoField(primary_key=True)
    # No index of its own: the unique (actor, key) index serves every look-up by actor as its prefix, and a
    # second index doubled the index writes of each history insert (benchmark P3).
    actor = models.ForeignKey(Actor, on_delete=models.CASCADE, related_name="history", db_index=False)
    key = models.TextField()
    location = models.JSONField(default=list)
    kind = models.CharField(max_length=40)
    data = models.JSONField(default=dict)
    status = models.CharField(max_length=20, default="pending")
    attempts = models.IntegerField(default=0)
    error = models.JSONField(null=True, blank=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    completed_at = models.DateTimeField(null=True, blank=True)
    rollback_completed_at = models.DateTimeField(null=True, blank=True)
    rollback_error = models.JSONField(null=True, blank=True)
    #: the code version of the process that last wrote the entry (None: unversioned)
    code_version = models.CharField(max_length=200, null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["actor", "key"], name="rivet_entry_actor_key_uniq"),
        ]
        ordering = ["id"]
        verbose_name_plural = "history entries"

    def __str__(self) -> str:
        return f"{self.key} [{self.kind}, {self.status}]"


class QueueMessage(models.Model):
    """One queue message sent to an actor; FIFO per actor by ``id``."""

    id = models.BigAutoField(primary_key=True)
    actor = models.ForeignKey(Actor, on_delete=models.CASCADE, related_name="messages")
    name = models.CharField(max_length=200)
    body = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField()
    completable = models.BooleanField(default=False)
    status = models.CharField(max_length=20, default="pending")
    response = models.JSONField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    #: the W3C trace context of the send: the run that receives the message links to it
    trace_context = models.JSONField(null=True, blank=True)
    #: the sender's deduplication id (``send(dedup_id=)``): one kept message per (actor, dedup_id); NULLs
    #: (sends without one) never collide (DESIGN.md section 20)
    dedup_id = models.CharField(max_length=200, null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["actor", "status", "id"], name="rivet_msg_fifo_idx")]
        constraints = [
            models.UniqueConstraint(fields=["actor", "dedup_id"], name="rivet_msg_dedup_uniq"),
        ]
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.name} #{self.id} ({self.status})"


class CronEntry(models.Model):
    """A recurring action of an actor: every ``interval_seconds`` or on a cron ``expression`` in ``timezone``."""

    id = models.BigAutoField(primary_key=True)
    actor = models.ForeignKey(Actor, on_delete=models.CASCADE, related_name="cron_entries")
    name = models.CharField(max_length=200)
    interval_seconds = models.FloatField(null=True, blank=True)
    expression = models.CharField(max_length=200, null=True, blank=True)
    timezone = models.CharField(max_length=64, default="UTC")
    action = models.CharField(max_length=200)
    args = models.JSONField(default=list, blank=True)
    next_fire_at = models.DateTimeField(null=True, blank=True, db_index=True)
    last_fired_at = models.DateTimeField(null=True, blank=True)
    max_history = models.IntegerField(default=100)
    created_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["actor", "name"], name="rivet_cron_actor_name_uniq"),
        ]
        verbose_name_plural = "cron entries"

    def __str__(self) -> str:
        return f"{self.name} -> {self.action}"


class CronFire(models.Model):
    """One firing of a cron entry (capped at the entry's ``max_history`` rows)."""

    id = models.BigAutoField(primary_key=True)
    cron = models.ForeignKey(CronEntry, on_delete=models.CASCADE, related_name="fires")
    scheduled_at = models.DateTimeField()
    fired_at = models.DateTimeField()
    status = models.CharField(max_length=20, default="ok")
    result = models.JSONField(null=True, blank=True)
    error = models.JSONField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["cron", "id"], name="rivet_cronfire_idx")]
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.cron_id} @ {self.fired_at} ({self.status})"


class Schedule(models.Model):
    """A schedule managed as data (``client().schedules``, DESIGN.md section 20): fires actor type ``actor``
    at ``key`` (null: a new actor per tick) on ``cron`` in ``timezone`` or ``every`` seconds."""

    schedule_id = models.CharField(max_length=200, primary_key=True)
    actor = models.CharField(max_length=200)
    key = models.JSONField(null=True, blank=True)
    cron = models.CharField(max_length=200, null=True, blank=True)
    every = models.FloatField(null=True, blank=True)
    timezone = models.CharField(max_length=64, default="UTC")
    input = models.JSONField(null=True, blank=True)
    action = models.CharField(max_length=200, null=True, blank=True)
    args = models.JSONField(default=list, blank=True)
    catchup = models.CharField(max_length=8, default="one")
    paused = models.BooleanField(default=False)
    next_fire_at = models.DateTimeField(null=True, blank=True, db_index=True)
    last_fired_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["schedule_id"]

    def __str__(self) -> str:
        return self.schedule_id


class ScheduleFire(models.Model):
    """One tick of a ``Schedule`` that was fired: unique per (schedule, tick), inserted before the fire."""

    id = models.BigAutoField(primary_key=True)
    schedule = models.ForeignKey(Schedule, on_delete=models.CASCADE, related_name="fires")
    tick = models.DateTimeField()
    fired_at = models.DateTimeField()
    how = models.CharField(max_length=10, default="sweep")
    status = models.CharField(max_length=10, default="claimed")
    actor_id = models.CharField(max_length=64, null=True, blank=True)
    error = models.JSONField(null=True, blank=True)
    missed = models.IntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["schedule", "tick"], name="rivet_schedulefire_tick_uniq"),
        ]
        ordering = ["tick"]

    def __str__(self) -> str:
        return f"{self.schedule_id} @ {self.tick} ({self.status})"


class FlowStart(models.Model):
    """One run start (a claim) of a rate-limited actor: ``RateLimit(count, per)`` counts them per group
    ``(name, group)`` over the last ``per`` seconds; rows older than the window are deleted by later claims.
    ``(actor_id, lease_token)`` is unique: one claim is one start."""

    id = models.BigAutoField(primary_key=True)
    name = models.CharField(max_length=200)
    group = models.TextField()
    actor_id = models.CharField(max_length=32)
    lease_token = models.BigIntegerField()
    started_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["actor_id", "lease_token"], name="rivet_flowstart_claim_uniq"),
        ]
        indexes = [models.Index(fields=["name", "group", "started_at"], name="rivet_flowstart_window_idx")]

    def __str__(self) -> str:
        return f"{self.name}[{self.group}] @ {self.started_at}"


class OperatorAction(models.Model):
    """One operator action on an actor (replay, recover, cancel, pause, resume; ``bulk_*`` from a bulk
    action): who did it, why, when, and the history entries it deleted or reset, archived as tagged JSON
    (DESIGN.md section 12). Written in the same transaction as the change it records."""

    id = models.BigAutoField(primary_key=True)
    actor = models.ForeignKey(
        Actor, on_delete=models.CASCADE, related_name="operator_actions", db_index=False
    )
    action = models.CharField(max_length=40)
    who = models.CharField(max_length=200)
    reason = models.TextField(null=True, blank=True)
    at = models.DateTimeField()
    archived_entries = models.JSONField(default=list, blank=True)

    class Meta:
        indexes = [models.Index(fields=["actor", "-id"], name="rivet_opaction_actor_idx")]
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"{self.action} by {self.who} @ {self.at}"


class Dashboard(Actor):
    """A proxy of ``Actor`` (no table) that gives the admin dashboard its URL,
    ``/admin/rivet_workflows/dashboard/``, and its line in the app index."""

    class Meta:
        proxy = True
        verbose_name = "dashboard"
        verbose_name_plural = "dashboard"


class StreamItem(models.Model):
    """One item of an actor's durable stream (DESIGN.md section 17): ``offset`` is dense from 0 per
    ``(actor, name)``; ``value`` is tagged JSON. ``closes`` marks the row that closes the stream (it takes
    the offset after the last item and is never shown to readers). ``attempt`` is the step attempt that wrote
    the item (None for a write of workflow code), ``step_key`` the step's history key, ``discarded`` True
    once that attempt did not complete; ``write_key`` (a recorded write's history key) makes a recorded
    write idempotent. Deleted with the actor."""

    id = models.BigAutoField(primary_key=True)
    actor = models.ForeignKey(Actor, on_delete=models.CASCADE, related_name="stream_items", db_index=False)
    name = models.CharField(max_length=200)
    offset = models.BigIntegerField()
    value = models.JSONField(null=True, blank=True)
    attempt = models.IntegerField(null=True, blank=True)
    step_key = models.TextField(null=True, blank=True)
    write_key = models.TextField(null=True, blank=True)
    discarded = models.BooleanField(default=False)
    closes = models.BooleanField(default=False)
    at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["actor", "name", "offset"], name="rivet_stream_offset_uniq"),
            models.UniqueConstraint(
                fields=["actor", "write_key"],
                condition=Q(write_key__isnull=False),
                name="rivet_stream_write_key_uniq",
            ),
        ]
        indexes = [
            models.Index(
                fields=["actor", "step_key"],
                condition=Q(step_key__isnull=False),
                name="rivet_stream_step_idx",
            )
        ]
        ordering = ["actor", "name", "offset"]

    def __str__(self) -> str:
        return f"{self.name}[{self.offset}]"


class RelayMessage(models.Model):
    """One message a step sent to an actor on another shard (DESIGN.md section 21): written on the sender's
    shard in the transaction of the step's commit; the relay (``engine.runtime.relay``) delivers it to the
    target's shard with ``dedup_id=f"relay:{alias}:{id}"`` and sets ``delivered_at``. ``body`` is tagged
    JSON; ``attempts``/``last_error`` count and tell failed deliveries; ``failed`` marks one the target
    refused for good (its workflow closed, the actor gone): never tried again. No foreign key: the ids
    name actors of any shard, and a row outlives its sender's destruction. ``kind`` ``"create"``: a step
    body's ``get_or_create`` of the actor ``target_actor_id`` (``name`` its type, ``body`` ``{"key",
    "input"}``, the source its parent), delivered through the client before later rows to that target."""

    id = models.BigAutoField(primary_key=True)
    kind = models.CharField(max_length=8, default="send")
    source_actor_id = models.CharField(max_length=64)
    target_actor_id = models.CharField(max_length=64)
    name = models.CharField(max_length=200)
    body = models.JSONField(null=True, blank=True)
    completable = models.BooleanField(default=False)
    created_at = models.DateTimeField()
    delivered_at = models.DateTimeField(null=True, blank=True)
    attempts = models.IntegerField(default=0)
    last_error = models.TextField(null=True, blank=True)
    failed = models.BooleanField(default=False)

    class Meta:
        indexes = [
            models.Index(
                fields=["id"],
                condition=Q(delivered_at__isnull=True, failed=False),
                name="rivet_relay_pending_idx",
            )
        ]
        ordering = ["id"]

    def __str__(self) -> str:
        return f"relay #{self.id} {self.kind} {self.source_actor_id} -> {self.target_actor_id} {self.name}"
