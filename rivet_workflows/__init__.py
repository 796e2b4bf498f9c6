"""rivet_workflows: durable, replayable workflows on actors for Django (public API)."""

# NOTE: importing this package must not import Django (tests assert that `import rivet_workflows.engine`
# loads no Django). Django-bound helpers (client(), drain()) import lazily. Re-exports of the engine's
# public names are added here as the engine modules land.
