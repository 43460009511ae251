import torch
import torch.distributed as dist


def global_accuracy(logits, labels, num_classes):
    """Accuracy over every rank's samples, on every rank.

    `logits` is (n, num_classes) and `labels` is (n,) for this rank's n samples; n differs
    between ranks and may be 0. Returns (overall, per_class): the fraction of all samples
    predicted right, and for each class the fraction of that class's samples predicted right,
    both over the samples of all ranks together.
    """
    right = (logits.argmax(dim=1) == labels).to(torch.float64)
    onehot = torch.nn.functional.one_hot(labels, num_classes).to(torch.float64)
    # Sums, not ratios: per class the right predictions and the samples, in one tensor.
    stats = torch.stack([onehot.t() @ right, onehot.sum(dim=0)])
    dist.all_reduce(stats)
    correct, count = stats
    return correct.sum() / count.sum(), correct / count
