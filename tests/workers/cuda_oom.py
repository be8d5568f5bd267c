"""Rank 1 raises torch's CUDA out-of-memory error at the same step of every launch (inside @record,
so the traceback lands in its error file): a failure no restart mends."""

from _common import rank, record, sleep_forever, wait_for_pids
from torch.distributed.elastic.multiprocessing.errors import record as elastic_record


@elastic_record
def main() -> None:
    record()
    if rank() == 1:
        wait_for_pids(2)
        raise RuntimeError(
            "CUDA out of memory. Tried to allocate 2.00 GiB (GPU 1; 79.19 GiB total capacity; "
            "77.02 GiB already allocated; 1.06 GiB free; 77.60 GiB reserved in total by PyTorch)"
        )
    sleep_forever()


main()
