"""Test-only stand-in for the probe worker: fails at once unless NCCL_SHM_DISABLE=1 is set.

A stand-in for a machine whose communication only works with one documented workaround, so the
workaround search can be run end to end without GPUs.
"""

import os
import sys

if __name__ == "__main__":
    if os.environ.get("NCCL_SHM_DISABLE") != "1":
        sys.stderr.write("stand-in failure: NCCL_SHM_DISABLE is not 1\n")
        sys.exit(3)
    from isaaclab_mgpu.rank import probe_worker as worker

    sys.exit(worker.main())
