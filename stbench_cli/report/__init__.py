"""The report side: tables, plots and the profile report (pure: rows in, text and images out; no torch)."""
