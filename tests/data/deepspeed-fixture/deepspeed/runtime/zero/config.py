import sys
from typing import Optional
from pydantic import Field
from deepspeed.runtime.config_utils import pp_int, DeepSpeedConfigModel
from .offload_config import DeepSpeedZeroOffloadOptimizerConfig

ZERO_OPTIMIZATION = "zero_optimization"


def get_zero_config(param_dict):
    if ZERO_OPTIMIZATION in param_dict:
        return DeepSpeedZeroConfig(**param_dict[ZERO_OPTIMIZATION])
    return DeepSpeedZeroConfig()


class DeepSpeedZeroConfig(DeepSpeedConfigModel):
    stage: int = 0
    reduce_bucket_size: int = Field(pp_int(5e8), ge=0)
    offload_optimizer: Optional[DeepSpeedZeroOffloadOptimizerConfig] = None
    prefetch_bucket_size: int = Field(pp_int(5e7), ge=0, alias="stage3_prefetch_bucket_size")
    model_persistence_threshold: int = Field(pp_int(sys.maxsize, "sys.maxsize"), ge=0)
    cpu_offload: Optional[bool] = Field(None, json_schema_extra={"deprecated": True, "new_param": "offload_optimizer"})
