from .constants import *
from .config_utils import get_scalar_param
from .zero.config import get_zero_config
from .swap_tensor.aio_config import get_aio_config


def get_train_batch_size(param_dict):
    return get_scalar_param(param_dict, TRAIN_BATCH_SIZE, TRAIN_BATCH_SIZE_DEFAULT)


def get_gradient_clipping(param_dict):
    return get_scalar_param(param_dict, GRADIENT_CLIPPING, GRADIENT_CLIPPING_DEFAULT)


def get_fp16_enabled(param_dict):
    if FP16 in param_dict.keys():
        return get_scalar_param(param_dict[FP16], FP16_ENABLED, FP16_ENABLED_DEFAULT)
    return False


def get_bfloat16_enabled(param_dict):
    for key in [BFLOAT16, BFLOAT16_OLD]:
        if key in param_dict.keys():
            return True
    return False


def get_sparse_mode(param_dict):
    # called with a block (below), not with the top-level dict: its key is not a top-level key
    return param_dict[SPARSE_MODE]


def get_sparse_attention(param_dict):
    sparsity = param_dict.get("sparse_attention", {})
    return get_sparse_mode(sparsity)


class DeepSpeedConfig(object):

    def _initialize_params(self, param_dict):
        self.train_batch_size = get_train_batch_size(param_dict)
        self.gradient_clipping = get_gradient_clipping(param_dict)
        self.fp16_enabled = get_fp16_enabled(param_dict)
        self.bfloat16_enabled = get_bfloat16_enabled(param_dict)
        self.sparse = get_sparse_attention(param_dict)
        self.zero_config = get_zero_config(param_dict)
        self.aio_config = get_aio_config(param_dict)
