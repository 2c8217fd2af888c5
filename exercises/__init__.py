"""Your implementations: fill in the seven modules, in curriculum order."""
