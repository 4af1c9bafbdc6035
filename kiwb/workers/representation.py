"""A teacher's representation of each text: the vector its classifier head reads, taken from
the dropout-off forward that scoring runs anyway (a hook, no second forward).

`head` (the default) is the input of the layer that produces the logits: BERT's pooled [CLS],
RoBERTa's and ELECTRA's head after its dense layer, DistilBERT's pre-classifier output, and for a
decoder classifier (Qwen, Llama), whose head reads every position, the last real token's state,
the one transformers takes the logits of. `mean` is the mean of the last hidden states over the
text's tokens; `cls` the last hidden state of the first token (an encoder's [CLS], before any
pooler). Stored in float16.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

FLOAT16_MAX = 65504.0  # larger values would be stored as infinity


class RepresentationCapture:
    """Keeps the representation of a model's dropout-off forwards (dropout-on passes, run in
    training mode, are not kept). Use as a context manager; `take()` after each forward."""

    def __init__(self, model: nn.Module, mode: str):
        if mode not in ("head", "mean", "cls"):
            raise ValueError(f"unknown representation {mode!r}; choose head, mean or cls")
        self.model, self.mode = model, mode
        self._held: torch.Tensor | None = None
        self._mask: torch.Tensor | None = None
        self._handles: list = []

    def __enter__(self) -> RepresentationCapture:
        self._handles.append(self.model.register_forward_pre_hook(self._keep_mask, with_kwargs=True))
        if self.mode == "head":
            self._handles.append(output_layer(self.model).register_forward_pre_hook(self._keep_input))
        else:
            self._handles.append(self.model.base_model.register_forward_hook(self._keep_output))
        return self

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def _keep_mask(self, module, args, kwargs) -> None:
        if not module.training:
            self._mask = kwargs.get("attention_mask")

    def _keep_input(self, module, args) -> None:
        if not module.training:
            self._held = args[0]

    def _keep_output(self, module, args, output) -> None:
        if not module.training:
            self._held = output[0] if isinstance(output, tuple) else output.last_hidden_state

    def take(self) -> torch.Tensor:
        """(n, d) float32 representation of the last dropout-off forward's texts."""
        held, mask = self._held, self._mask
        if held is None:
            raise RuntimeError("no dropout-off forward ran since the last take()")
        self._held = None
        if self.mode == "mean":
            return mean_pooled(held, mask)
        if self.mode == "cls":
            return held[:, 0].float()
        if held.dim() == 3:  # a head over every position (decoders): the last real token's
            return held[torch.arange(len(held), device=held.device), last_token(held, mask)].float()
        return held.float()


def output_layer(model: nn.Module) -> nn.Linear:
    """The linear layer that produces the logits: the last one with num_labels outputs (heads
    are built after their encoder in every transformers classifier)."""
    problem = capture_problem(model, "head")
    if problem:
        raise ValueError(problem)
    count = int(model.config.num_labels)
    return [module for module in model.modules()
            if isinstance(module, nn.Linear) and module.out_features == count][-1]


def capture_problem(model: nn.Module, mode: str) -> str | None:
    """Why this model's representation cannot be kept in `mode`, with the fix; None if it can."""
    if mode in ("mean", "cls"):
        return None if isinstance(getattr(model, "base_model", None), nn.Module) and \
            model.base_model is not model else (
            f"this {type(model).__name__} has no encoder apart from its head to read its last "
            'hidden states from; set [scoring] representation = "none"')
    count = int(model.config.num_labels)
    if not any(isinstance(module, nn.Linear) and module.out_features == count
               for module in model.modules()):
        return (f"no linear layer of {count} outputs (its classifier) was found in this "
                f'{type(model).__name__}; set [scoring] representation = "mean" (the mean of '
                'its last hidden states) or "none"')
    return None


def last_token(hidden: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """(n,) index of each row's last real token (padding on either side), as a decoder
    classifier pools its logits."""
    length = hidden.shape[1]
    if mask is None:
        return torch.full((len(hidden),), length - 1, dtype=torch.long, device=hidden.device)
    positions = torch.arange(length, device=hidden.device)
    return (mask.to(torch.long) * positions).argmax(dim=1)


def mean_pooled(hidden: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """(n, H) the mean of (n, T, H) hidden states over each text's real tokens."""
    if attention_mask is None:
        return hidden.float().mean(1)
    mask = attention_mask.float().unsqueeze(-1)  # summed in float32: half precision overflows
    return (hidden.float() * mask).sum(1) / mask.sum(1).clamp(min=1)


def stored(representation: torch.Tensor) -> np.ndarray:
    """The float16 array kept on disk (clipped to float16's range: no infinities)."""
    return representation.float().clamp(-FLOAT16_MAX, FLOAT16_MAX).to(torch.float16).cpu().numpy()
