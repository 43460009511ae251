# DataParallel scatters its input along dim 0 with Tensor.chunk over the devices it was given;
# here the chunking itself, for a batch of `batch` samples over 4 devices.
import torch

chunks = torch.arange(params["batch"]).chunk(4)
report("chunk_sizes", [len(c) for c in chunks])
report("devices_with_work", len(chunks))
