from pydantic import Field
from deepspeed.runtime.config_utils import DeepSpeedConfigModel


class DeepSpeedZeroOffloadOptimizerConfig(DeepSpeedConfigModel):
    device: str = "none"
    buffer_count: int = Field(4, ge=0)
    ratio: float = Field(1.0, ge=0.0, le=1.0)
