"""User code for the import-hook tests: imported only through autoflow's hook."""
