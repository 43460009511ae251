import torch


def shard_indices(n, rank, world_size, shuffle=False, seed=0, epoch=0):
    """The dataset indices rank `rank` of `world_size` visits in epoch `epoch`.

    Must give exactly what DistributedSampler(dataset_of_length_n, num_replicas=world_size,
    rank=rank, shuffle=shuffle, seed=seed, drop_last=False) yields after set_epoch(epoch).
    """
    if shuffle:
        g = torch.Generator()
        g.manual_seed(seed + epoch)
        order = torch.randperm(n, generator=g).tolist()
    else:
        order = list(range(n))
    # Deal the indices out like cards: when n is not a multiple of world_size,
    # the first ranks get one more than the others.
    return order[rank::world_size]
