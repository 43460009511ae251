"""DDP Drill: PyTorch distributed-training questions whose answers are checked by running them."""
