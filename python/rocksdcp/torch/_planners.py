"""torch's default planners, with byte items as bytes: nothing pickled."""

import io

from rocksdcp import InvalidArgument
from rocksdcp.torch import _compat as c


class DefaultSavePlanner(c.BaseDefaultSavePlanner):
    """torch's ``DefaultSavePlanner``, but a value that is ``bytes`` (or a
    ``bytearray`` or ``memoryview``) is saved as those bytes, not pickled
    with ``torch.save``; any other value that is not a tensor is refused
    with ``InvalidArgument`` naming its fqn. The checkpoint then holds no
    pickle, and the C++ library, the ``rocksdcp`` CLI and ``ldb`` read every
    byte item as it was given."""

    def transform_object(self, write_item, object):  # noqa: A002 - torch's name
        if write_item.type != c.WriteItemType.BYTE_IO:
            return super().transform_object(write_item, object)
        if isinstance(object, (bytes, bytearray, memoryview)):
            return io.BytesIO(bytes(object))
        raise InvalidArgument(
            "item {!r} is a {}: rocksdcp saves tensors and bytes and never pickles; "
            "encode it to bytes yourself".format(write_item.index.fqn, type(object).__name__))


class DefaultLoadPlanner(c.BaseDefaultLoadPlanner):
    """torch's ``DefaultLoadPlanner``, but a byte item is loaded into the
    state dict as ``bytes``, exactly as saved, instead of being unpickled
    with ``torch.load``: safe for checkpoints from any source, and the way
    to read byte items saved by the C++ library."""

    def load_bytes(self, read_item, value):
        self.state_dict[read_item.dest_index.fqn] = value.getvalue()
