"""Training recipes that use hf-stable-attn the way a user would (Trainer, Accelerate, PEFT)."""
