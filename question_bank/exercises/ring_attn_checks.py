# Checks: a causal sequence of world_size chunks of 16 positions, d = 32, against
# F.scaled_dot_product_attention(is_causal=True) on the whole sequence on one process; then
# again with the queries scaled by 30 (scores far above exp's float32 range). The outputs are
# reported as 4 fixed projections per row. The engine counts the bytes each rank sends.
import torch as _torch
import torch.nn.functional as _F

_C, _D = 16, 32
_P = _torch.randn(_D, 4, generator=_torch.Generator().manual_seed(99))

for _case, _qscale in ((1, 1.0), (2, 30.0)):
    _g = _torch.Generator().manual_seed(_case)
    _q, _k, _v = (_torch.randn(world_size * _C, _D, generator=_g) for _ in range(3))
    _q = _q * _qscale
    _rows = slice(rank * _C, (rank + 1) * _C)
    _out = ring_attention(_q[_rows].clone(), _k[_rows].clone(), _v[_rows].clone())
    _ref = _F.scaled_dot_product_attention(_q[None], _k[None], _v[None], is_causal=True)[0][_rows]
    report(f"output_{_case}", _out @ _P)
    report(f"output_{_case}_ok", bool(_torch.allclose(_out, _ref, atol=1e-5 * _qscale)))
