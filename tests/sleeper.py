"""Test-only: a module that sleeps until it is killed (a cell left running by a dead parent)."""

import time

while True:
    time.sleep(1)
