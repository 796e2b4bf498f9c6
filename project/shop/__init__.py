"""A small shop app of the example project: the models an atomic step writes (manual: "Exactly-once database
writes")."""
