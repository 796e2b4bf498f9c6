"""Integrations of rivet_workflows with other Django frameworks (each module imports its framework lazily)."""
