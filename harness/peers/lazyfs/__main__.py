"""`python -m harness.peers.lazyfs DIR`: the lazy file system's daemon (fs.py)."""

import sys

from harness.peers.lazyfs.fs import main

sys.exit(main(sys.argv[1:]))
