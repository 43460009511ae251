import torch
import torch.distributed as dist


def global_accuracy(logits, labels, num_classes):
    n = dist.get_world_size()
    right = (logits.argmax(dim=1) == labels).to(torch.float64)
    onehot = torch.nn.functional.one_hot(labels, num_classes).to(torch.float64)
    # Sums the right predictions, but counts as if every rank had as many samples as this one.
    stats = torch.stack([onehot.t() @ right, onehot.sum(dim=0) * n])
    correct = stats[0].clone()
    dist.all_reduce(correct)
    count = stats[1]
    return correct.sum() / count.sum(), correct / count
