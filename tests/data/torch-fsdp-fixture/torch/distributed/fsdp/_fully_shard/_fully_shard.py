from typing import overload

from ._fsdp_api import OffloadPolicy


@overload
def fully_shard(module: int, *, reshard_after_forward: bool = ...) -> int: ...


@overload
def fully_shard(module: list, *, reshard_after_forward: bool = ...) -> list: ...


def fully_shard(module, *, reshard_after_forward=True, offload_policy: OffloadPolicy = OffloadPolicy()):
    return module
