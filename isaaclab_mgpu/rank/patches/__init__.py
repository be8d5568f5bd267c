"""Every patch mgpu applies to an upstream library, one module per library.

Rank side: applied in each rank, never in the ``mgpu`` process.

Each patch names the upstream function it changes and why, and is applied only inside a rank.
"""
