from dataclasses import dataclass
from enum import auto, Enum


class ShardingStrategy(Enum):
    FULL_SHARD = auto()
    NO_SHARD = 3


@dataclass
class CPUOffload:
    offload_params: bool = False
