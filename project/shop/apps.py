"""The shop app's config."""

from __future__ import annotations

from django.apps import AppConfig


class ShopConfig(AppConfig):
    name = "project.shop"
    label = "shop"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "Shop (example)"
