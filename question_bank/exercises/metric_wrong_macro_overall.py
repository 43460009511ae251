import torch
import torch.distributed as dist


def global_accuracy(logits, labels, num_classes):
    right = (logits.argmax(dim=1) == labels).to(torch.float64)
    onehot = torch.nn.functional.one_hot(labels, num_classes).to(torch.float64)
    stats = torch.stack([onehot.t() @ right, onehot.sum(dim=0)])
    dist.all_reduce(stats)
    correct, count = stats
    per_class = correct / count
    return per_class.mean(), per_class  # the mean over classes, not over samples
