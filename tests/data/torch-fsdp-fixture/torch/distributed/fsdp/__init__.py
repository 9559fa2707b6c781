from ._fully_shard import CPUOffloadPolicy, fully_shard, OffloadPolicy
from .api import CPUOffload, ShardingStrategy
from .fully_sharded_data_parallel import FullyShardedDataParallel as FullyShardedDataParallel, Renamed as Other
