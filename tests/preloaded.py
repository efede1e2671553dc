"""A module a test forks from the warm server: prints, for each module named after it, whether
its process had it imported already (the server's preload) before this module ran."""

import sys

print(" ".join(str(name in sys.modules) for name in sys.argv[1:]))
