"""The Celery driver lives in ``rivet_workflows.driver``; the names settings used before the move still work."""

from __future__ import annotations

from kombu.utils.imports import symbol_by_name


def test_the_old_module_names_are_the_driver_modules() -> None:
    import rivet_workflows.dispatch
    import rivet_workflows.driver.dispatch
    import rivet_workflows.driver.fs_broker
    import rivet_workflows.driver.redis_broker
    import rivet_workflows.driver.tasks
    import rivet_workflows.fs_broker
    import rivet_workflows.redis_broker
    import rivet_workflows.tasks

    assert rivet_workflows.dispatch is rivet_workflows.driver.dispatch
    assert rivet_workflows.tasks is rivet_workflows.driver.tasks
    assert rivet_workflows.fs_broker is rivet_workflows.driver.fs_broker
    assert rivet_workflows.redis_broker is rivet_workflows.driver.redis_broker


def test_transport_strings_of_either_name_give_the_same_class() -> None:
    for name in ("redis_broker", "fs_broker"):
        old = symbol_by_name(f"rivet_workflows.{name}:Transport")
        new = symbol_by_name(f"rivet_workflows.driver.{name}:Transport")
        assert old is new


def test_the_app_registers_the_tasks_without_autodiscovery() -> None:
    from celery import current_app

    assert "rivet_workflows.run_actor" in current_app.tasks
    assert "rivet_workflows.fire_schedule" in current_app.tasks
