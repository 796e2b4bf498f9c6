"""A small shop app of the example project: the models an atomic step writes (README "Exactly-once database writes")."""
