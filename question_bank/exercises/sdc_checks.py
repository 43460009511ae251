# Checks: four rounds, each on three parameter tensors (1,049,600 float32 values, 4 MiB) that
# the driver hands every rank, identical everywhere but for what the round corrupts: nothing;
# the lowest bit of one value on a rank other than 0; the same on rank 0; an exponent bit on
# the last rank, in the last tensor. The values, and which rank, tensor and element a round
# corrupts, come from a seed only the drivers hold: no rank learns whether its copy, or
# another's, was corrupted except by comparing with the others. The lists returned on every
# rank are compared, in the app, with the reference solution's; the driver bounds the bytes
# each rank sends by the reference's (a few numbers per round, never the parameters).
_SHAPES = [[1024, 1024], [1024], [1024]]
_rounds = [
    ("clean", None, [], None),
    ("low_bit_other", 0, list(range(1, world_size)), None),  # about 1e-7 relative
    ("low_bit_rank0", 0, [0], None),
    ("exponent_last", 26, [world_size - 1], 2),  # a large change, in the last tensor
]
for _name, _bit, _ranks, _only in _rounds:
    report(f"found_{_name}", list(find_corrupt_ranks(
        secret_tensors(_name, _SHAPES, flip_bit=_bit, on_ranks=_ranks, only=_only))))
