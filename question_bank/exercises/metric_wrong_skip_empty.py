import torch
import torch.distributed as dist


def global_accuracy(logits, labels, num_classes):
    right = (logits.argmax(dim=1) == labels).to(torch.float64)
    rates, present = [], []
    for c in [None, *range(num_classes)]:
        mask = torch.ones_like(labels, dtype=torch.bool) if c is None else labels == c
        k = int(mask.sum())
        rates.append(right[mask].mean() if k else torch.tensor(0.0, dtype=torch.float64))
        present.append(float(k > 0))
    # Each rank's own accuracy, averaged over the ranks that have samples: no more NaN.
    stats = torch.cat([torch.stack(rates), torch.tensor(present, dtype=torch.float64)])
    dist.all_reduce(stats)
    m = num_classes + 1
    acc = stats[:m] / stats[m:]
    return acc[0], acc[1:]
