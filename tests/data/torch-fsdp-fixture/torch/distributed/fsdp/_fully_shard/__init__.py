from ._fsdp_api import CPUOffloadPolicy, OffloadPolicy
from ._fully_shard import fully_shard
