"""A module a test forks from the warm server: prints the multiprocessing start method it has."""

import multiprocessing

print(multiprocessing.get_start_method())
