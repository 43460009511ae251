import torch
import torch.distributed as dist


def global_accuracy(logits, labels, num_classes):
    right = (logits.argmax(dim=1) == labels).to(torch.float64)
    onehot = torch.nn.functional.one_hot(labels, num_classes).to(torch.float64)
    correct = onehot.t() @ right
    count = onehot.sum(dim=0)
    dist.all_reduce(correct)  # right numbers, two collectives where one would do
    dist.all_reduce(count)
    return correct.sum() / count.sum(), correct / count
