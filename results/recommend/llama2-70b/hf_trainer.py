# The configuration zerosim recommend chose (stage 3, optimizer cpu, checkpointing full, mb 4 x ga 4, 8 GPUs).
# Hugging Face Trainer: pass these to TrainingArguments (the DeepSpeed config is ds_config.json beside this
# file; with Accelerate, `accelerate launch --use_deepspeed --deepspeed_config_file ds_config.json ...`).
from transformers import TrainingArguments

args = TrainingArguments(
    output_dir="out",
    per_device_train_batch_size=4,
    gradient_accumulation_steps=4,
    gradient_checkpointing=True,
    bf16=True,
    fp16=False,
    deepspeed="ds_config.json",
)
# 8 GPUs (2 nodes of 4): global batch 128 sequences of 4096 tokens.
