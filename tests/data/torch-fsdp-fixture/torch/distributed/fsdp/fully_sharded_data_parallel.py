class Renamed:
    pass


class FullyShardedDataParallel:
    def __init__(
        self,
        module,
        process_group=None,
        *,
        limit_all_gathers: bool = True,
        sharding_strategy=None,
        **kwargs,
    ):
        pass
