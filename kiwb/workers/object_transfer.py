"""One large Python object from rank 0 to every other rank, without copies of it.

torch's broadcast_object_list pickles the object (its tensors' data included) into bytes,
then copies those bytes into a tensor to send: a training plan's texts and targets then cost
rank 0 about three times their size on top of the object itself. Here the object is pickled
without its tensors (each is sent as it is, from its own memory) into a buffer that is sent
in place, so rank 0 holds one pickled copy of the texts and nothing more of the tensors.
"""

from __future__ import annotations

import io
import pickle

import torch

from kiwb.workers.collectives import collective


def send_object(value, doing: str, group=None) -> None:
    """Rank 0's side: broadcast `value` to the ranks of `group` (the job's own group when
    None), which call receive_object in the same order."""
    tensors: list[torch.Tensor] = []

    class _Pickler(pickle.Pickler):
        def persistent_id(self, obj):  # tensors travel beside the pickle, not inside it
            if isinstance(obj, torch.Tensor):
                tensors.append(obj.detach().to("cpu").contiguous())
                return ("tensor", tuple(obj.shape), str(obj.dtype).removeprefix("torch."))
            return None

    buffer = io.BytesIO()
    _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    payload = buffer.getbuffer()
    try:
        _broadcast(torch.tensor([len(payload)], dtype=torch.int64), doing, group)
        # the pickle's own memory, not a copy (freed before the buffer is released)
        _broadcast(torch.frombuffer(payload, dtype=torch.uint8), doing, group)
    finally:
        payload.release()
    for tensor in tensors:
        _broadcast_bytes(tensor, doing, group)


def receive_object(doing: str, group=None):
    """Ranks 1..: the object rank 0 sends with send_object."""
    size = _broadcast(torch.zeros(1, dtype=torch.int64), doing, group)
    body = _broadcast(torch.empty(int(size.item()), dtype=torch.uint8), doing, group)
    tensors: list[torch.Tensor] = []

    class _Unpickler(pickle.Unpickler):
        def persistent_load(self, pid):
            _, shape, dtype = pid
            tensors.append(torch.empty(shape, dtype=getattr(torch, dtype)))
            return tensors[-1]

    value = _Unpickler(io.BytesIO(body.numpy())).load()
    del body
    for tensor in tensors:  # filled in place: the object holds these very tensors
        _broadcast_bytes(tensor, doing, group)
    return value


def _broadcast_bytes(tensor: torch.Tensor, doing: str, group) -> None:
    """A contiguous CPU tensor's bytes, from rank 0 into the same tensor elsewhere (as bytes:
    gloo does not carry every dtype, and bytes are bytes)."""
    if tensor.numel() > 0:
        _broadcast(tensor.reshape(-1).view(torch.uint8), doing, group)


def _broadcast(tensor: torch.Tensor, doing: str, group) -> torch.Tensor:
    import torch.distributed as dist

    collective(lambda: dist.broadcast(tensor, src=0, group=group), doing)
    return tensor
