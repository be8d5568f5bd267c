"""Every rank says hello on stdout and stderr and exits 0."""

import sys

from _common import rank, record

record()
print(f"hello from rank {rank()}", flush=True)
print(f"note from rank {rank()}", file=sys.stderr, flush=True)
