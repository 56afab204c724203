import sys

from .cli import main

# Guarded: compile workers are started with "spawn", which imports this module again.
if __name__ == "__main__":
    sys.exit(main())
