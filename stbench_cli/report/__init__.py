"""The report side (pure: result folders in, text, tables and figures out; no torch).

A study is read once (read, model), answered once (view: its finding, tables, figures and
flags), and that view is printed by `compare` (text), written by `report` (html) and ends `run`
and `profile`. docs/decisions/report.md names every module and how to add a finding or a column.
"""
