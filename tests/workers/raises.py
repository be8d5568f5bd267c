"""Rank 1 raises inside torch elastic's @record, so its traceback lands in its error file."""

from _common import rank, record, sleep_forever, wait_for_pids
from torch.distributed.elastic.multiprocessing.errors import record as elastic_record


@elastic_record
def main() -> None:
    record()
    if rank() == 1:
        wait_for_pids(2)
        raise ValueError("boom from rank 1")
    sleep_forever()


main()
