"""The drivers' secret tensors (driver.secret_tensors): what the checks of an exercise get for
data no learner process may be able to make again or compare with. The same on every rank,
drawn from a seed only drivers hold; with a flip, exactly one rank drawn from the given ones
holds a copy that differs in one bit of one element. (Through real runs: the sdc and
tensor-parallel cheats in tests/exercises/test_cheats.py.)"""

from __future__ import annotations

import pytest
import torch

from app.verify.engine.driver import Refused, SecretAsk, secret_tensors

WORLD = 4


def _ask(**header: object) -> SecretAsk:
    return SecretAsk.parse({"key": "round", "shapes": [[64], [8, 8]], **header}, WORLD)


def test_every_rank_gets_the_same_tensors_and_another_seed_or_key_gives_others() -> None:
    copies = [secret_tensors(_ask(), hidden_seed=11, rank=r) for r in range(WORLD)]
    assert [t.shape for t in copies[0]] == [torch.Size([64]), torch.Size([8, 8])]
    assert all(torch.equal(a, b) for c in copies[1:] for a, b in zip(c, copies[0], strict=True))
    assert not torch.equal(secret_tensors(_ask(), hidden_seed=12, rank=0)[0], copies[0][0])
    other_key = SecretAsk.parse({"key": "other", "shapes": [[64], [8, 8]]}, WORLD)
    assert not torch.equal(secret_tensors(other_key, hidden_seed=11, rank=0)[0], copies[0][0])


@pytest.mark.parametrize("seed", range(8))
def test_a_flip_changes_one_bit_of_one_element_on_one_of_the_ranks_named(seed: int) -> None:
    ask = _ask(flip_bit=0, on_ranks=[1, 2, 3])
    copies = [secret_tensors(ask, hidden_seed=seed, rank=r) for r in range(WORLD)]
    clean = secret_tensors(_ask(), hidden_seed=seed, rank=0)
    differ = {r: [i for i, (a, b) in enumerate(zip(c, clean, strict=True)) if not torch.equal(a, b)]
              for r, c in enumerate(copies)}
    victims = [r for r, tensors in differ.items() if tensors]
    assert len(victims) == 1 and victims[0] in (1, 2, 3)
    (which,) = differ[victims[0]]
    bits = (copies[victims[0]][which].view(-1).view(torch.int32)
            ^ clean[which].view(-1).view(torch.int32))
    assert bits.count_nonzero() == 1 and int(bits.abs().max()) == 1


def test_a_flip_can_be_kept_to_one_tensor() -> None:
    for seed in range(6):
        flipped = secret_tensors(_ask(flip_bit=26, on_ranks=[3], only=1), hidden_seed=seed, rank=3)
        clean = secret_tensors(_ask(), hidden_seed=seed, rank=3)
        assert torch.equal(flipped[0], clean[0]) and not torch.equal(flipped[1], clean[1])


@pytest.mark.parametrize("header", [
    {"shapes": []},
    {"shapes": [[0]]},
    {"shapes": [[4096, 4096, 2]]},  # more elements than one ask may have
    {"shapes": "[[4]]"},
    {"flip_bit": 32, "on_ranks": [1]},
    {"flip_bit": 1, "on_ranks": []},
    {"flip_bit": 1, "on_ranks": [WORLD]},
    {"flip_bit": True, "on_ranks": [1]},
    {"flip_bit": 1, "on_ranks": [1], "only": 2},
])
def test_an_ask_outside_the_rules_is_refused(header: dict[str, object]) -> None:
    with pytest.raises(Refused):
        SecretAsk.parse({"key": "k", "shapes": [[4], [4]], **header}, WORLD)
