import torch
import torch.distributed as dist


def global_accuracy(logits, labels, num_classes):
    """Accuracy over every rank's samples, on every rank.

    `logits` is (n, num_classes) and `labels` is (n,) for this rank's n samples; n differs
    between ranks and may be 0. Returns (overall, per_class): the fraction of all samples
    predicted right, and for each class the fraction of that class's samples predicted right,
    both over the samples of all ranks together.
    """
    n = dist.get_world_size()
    right = logits.argmax(dim=1) == labels
    per_class = torch.stack([right[labels == c].float().mean() for c in range(num_classes)])
    # Every rank's own accuracies, averaged over ranks.
    local = torch.cat([right.float().mean().reshape(1), per_class])
    dist.all_reduce(local)
    local /= n
    return local[0], local[1:]
