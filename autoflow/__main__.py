"""``python -m autoflow``: the same command line as the ``autoflow`` script."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
