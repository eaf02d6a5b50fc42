"""async_save's staging for rocksdcp's StorageWriter (torch 2.x's
AsyncStager): the copy of the state dict that the save writes in the
background while training goes on.

torch's own stager allocates a new copy of the whole state dict on every
async_save, and the caller waits while that memory is touched for the
first time (a page fault per 4 KiB) and filled. This one keeps its copy
and copies into it again the next time, as rocksdcp's C++
AsyncCheckpointer reuses its staging pool: the caller waits only for the
copy. The copy is made with torch's own state-dict utilities, so every
kind of value torch's stager handles (DTensor, ShardedTensor, nested
containers, non-tensor values) is staged the same way.

The kept copy is reused only when it is free, and a fresh one is made
otherwise:
- while the save that took the previous copy still holds it (the staged
  dict is followed by a weak reference), so that a second async_save
  before the first one finished never overwrites what is being written;
- once it went to another process (async_save's process executor sends
  the staged tensors through shared memory), since that process may still
  read it;
- when the state dict's structure, shapes or dtypes changed.
"""

import weakref

import torch


class _Staged(dict):
    """A staged state dict: a dict a weak reference can follow."""


def _tensors(value):
    if isinstance(value, dict):
        for v in value.values():
            yield from _tensors(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors(v)
    elif isinstance(value, torch.Tensor):
        yield getattr(value, "_local_tensor", value)
    elif hasattr(value, "local_shards"):
        for shard in value.local_shards():
            yield shard.tensor


class Stager:
    """Stages state dicts into a copy it keeps (``keep``) or a fresh one
    each time."""

    def __init__(self, keep):
        self._keep = keep
        self._copy = None
        # The staged dict of the save that took the kept copy last.
        self._taken = None
        #: Whether the last stage reused the kept copy (for tests).
        self.reused = False

    def _kept_copy_is_free(self, state_dict):
        from torch.distributed._state_dict_utils import _check_state_dict_similarity
        return (self._copy is not None
                and (self._taken is None or self._taken() is None)
                and not any(t.is_shared() for t in _tensors(self._copy))
                and _check_state_dict_similarity(state_dict, self._copy))

    def stage(self, state_dict):
        # torch 2.x's (async_save is torch 2.x's too).
        from torch.distributed._state_dict_utils import _copy_state_dict, _create_cpu_state_dict
        self.reused = self._keep and self._kept_copy_is_free(state_dict)
        if self.reused:
            target = self._copy
        else:
            target = _create_cpu_state_dict(state_dict)
            kept_is_busy = self._taken is not None and self._taken() is not None
            if self._keep and not kept_is_busy:
                self._copy = target
        staged = _Staged(_copy_state_dict(state_dict, target, type_check=False))
        if target is self._copy:
            self._taken = weakref.ref(staged)
        return staged

    def close(self):
        self._copy = None
        self._taken = None
