import torch
import torch.distributed as dist


def global_accuracy(logits, labels, num_classes):
    right = (logits.argmax(dim=1) == labels).to(torch.float64)
    onehot = torch.nn.functional.one_hot(labels, num_classes).to(torch.float64)
    stats = torch.stack([onehot.t() @ right, onehot.sum(dim=0)])
    dist.reduce(stats, dst=0)  # only rank 0 ends up with the totals
    correct, count = stats
    return correct.sum() / count.sum(), correct / count
