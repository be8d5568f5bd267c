"""Progress reports from a training rank to its ``mgpu`` supervisor: the public name.

User scripts write ``from isaaclab_mgpu import progress``; the definition lives in
:mod:`isaaclab_mgpu.contract.progress`, which documents the API.
"""

from isaaclab_mgpu.contract.progress import *  # noqa: F403
from isaaclab_mgpu.contract.progress import __doc__ as _contract_doc

__doc__ = _contract_doc
