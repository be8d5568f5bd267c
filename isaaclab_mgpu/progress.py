"""``from isaaclab_mgpu import progress``: :mod:`isaaclab_mgpu.contract.progress` by its public name."""

from isaaclab_mgpu.contract.progress import *  # noqa: F403
from isaaclab_mgpu.contract.progress import __doc__ as _contract_doc

__doc__ = _contract_doc
