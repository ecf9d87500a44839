"""Parametric memory: the user's LoRA adapters and distilling memory into one."""
