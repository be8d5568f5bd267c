"""Test-only stand-in for the probe worker: the real one, with a corrupting all-reduce.

Rank 1 adds 1 to element 3 of every all-reduce result of 4 or more elements, so sizes of 16 B and
up must show wrong elements and smaller sizes none. The product's worker has no such option.
"""

import sys

import torch.distributed as dist

from isaaclab_mgpu.rank import probe_worker as worker

_real_all_reduce = dist.all_reduce


def _corrupting_all_reduce(tensor, *args, **kwargs):
    work = _real_all_reduce(tensor, *args, **kwargs)
    if dist.get_rank() == 1 and tensor.numel() >= 4:
        tensor[3] += 1
    return work


dist.all_reduce = _corrupting_all_reduce

if __name__ == "__main__":
    sys.exit(worker.main())
