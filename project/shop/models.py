"""The example shop's model: an ``Order`` placed by a workflow's atomic step, at most once per checkout."""

from __future__ import annotations

from django.db import models


class Order(models.Model):
    """One placed order. ``checkout`` is the key of the checkout workflow that placed it (not unique on
    purpose: exactly-once comes from the atomic step, not from a constraint)."""

    checkout = models.CharField(max_length=200, db_index=True)
    item = models.CharField(max_length=200)
    quantity = models.PositiveIntegerField(default=1)
    attempt = models.PositiveIntegerField(default=1)  # the step attempt that wrote the row
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"order {self.pk} of {self.checkout}: {self.quantity} x {self.item}"
