"""``EagerAdam``: ``torch.optim.Adam`` without importing ``torch._dynamo``.

torch's optimizers wrap ``step`` (``_use_grad_for_differentiable``) and ``add_param_group``,
``zero_grad``, ``state_dict``, ``load_state_dict`` (``torch._disable_dynamo``) in functions
that import ``torch._dynamo`` on their first call, to cooperate with ``torch.compile``. Nothing
here compiles, and that import costs about as long as importing torch itself (3-5 s on the 2-core
machine: ``python -X importtime -c "import torch._dynamo"``); ``foreach=False`` / ``fused=False``
do not avoid it, since ``Optimizer.__init__`` calls ``add_param_group``. ``EagerAdam`` calls the
functions those wrappers wrap (``__wrapped__``) with the grad mode ``step``'s wrapper sets, so
it runs the very same arithmetic as ``torch.optim.Adam`` (tests/test_training.py checks that
the parameters after a few updates are identical) and imports nothing more.
"""

from __future__ import annotations

import torch


def _unwrapped(method):
    """The function a torch wrapper wraps, or the method itself where this torch has none."""
    return getattr(method, "__wrapped__", method)


_ADAM_STEP = _unwrapped(torch.optim.Adam.step)


class EagerAdam(torch.optim.Adam):
    """``torch.optim.Adam`` for eager mode only (not under ``torch.compile``)."""

    add_param_group = _unwrapped(torch.optim.Optimizer.add_param_group)
    zero_grad = _unwrapped(torch.optim.Optimizer.zero_grad)
    state_dict = _unwrapped(torch.optim.Optimizer.state_dict)
    load_state_dict = _unwrapped(torch.optim.Optimizer.load_state_dict)

    def step(self, closure=None):
        # what _use_grad_for_differentiable does around Adam's step, less its dynamo graph breaks
        with torch.set_grad_enabled(self.defaults["differentiable"]):
            return _ADAM_STEP(self, closure)
