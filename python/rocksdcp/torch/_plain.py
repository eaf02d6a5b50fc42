"""Plain data as bytes, and back, without pickle.

What torch's planners put in ``Metadata.planner_data`` (torch's flattening
maps each fqn to a tuple path; other planners put dataclasses there), and
the values rocksdcp's ``DefaultSavePlanner`` saves that are neither tensors
nor bytes (``None``, strings, lists of names), are stored as JSON behind a
marker, with tagged objects for what JSON lacks::

    value  = b"rocksdcp-json:" JSON
    tagged = {"$rocksdcp": TAG, ...}
      "tuple" items | "set" items | "frozenset" items | "torch.Size" items
      "dict" items: [[key, value], ...]      (keys that are not str)
      "bytes" base64 | "float" value: "nan" | "inf" | "-inf"
      "torch.dtype" name
      "dataclass" type: "module:QualName", fields: {name: value}
      "enum" type, name

Decoding never imports a module and never runs a constructor: a dataclass
or enum comes back as its class only when that class is loaded already in
a module of torch or rocksdcp, or was registered with
``register_plain_type``; it is filled field by field (``__init__`` and
``__post_init__`` do not run). Any other comes back as a ``PlainRecord``
with the same attributes, so a checkpoint from an untrusted source decodes
to data, never to code.
"""

import base64
import dataclasses
import enum
import json
import math
import sys

import torch

from rocksdcp import Corruption, InvalidArgument

PREFIX = b"rocksdcp-json:"
_TAG = "$rocksdcp"
_MAX_DEPTH = 200
_REGISTERED = {}


def register_plain_type(cls):
    """Lets ``cls`` (a dataclass or an Enum) decode as itself, wherever it
    is defined. Returns ``cls``, so that it can decorate the class."""
    if not (dataclasses.is_dataclass(cls) or (isinstance(cls, type) and issubclass(cls, enum.Enum))):
        raise InvalidArgument("register_plain_type: {} is neither a dataclass nor an Enum".format(cls))
    _REGISTERED[_type_name(cls)] = cls
    return cls


@dataclasses.dataclass(frozen=True)
class PlainRecord:
    """A dataclass or enum whose class this process may not rebuild: its
    class's name (``"module:QualName"``) and its fields as attributes."""

    type_name: str
    fields: dict

    def __getattr__(self, name):
        fields = object.__getattribute__(self, "fields")
        if name in fields:
            return fields[name]
        raise AttributeError(name)


def _type_name(cls):
    return "{}:{}".format(cls.__module__, cls.__qualname__)


def _encode(value, path, depth):
    if depth > _MAX_DEPTH:
        raise InvalidArgument("{}: nested more than {} deep".format(path, _MAX_DEPTH))
    d = depth + 1
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int) and not isinstance(value, enum.Enum):
        return int(value)
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return {_TAG: "float", "value": repr(value)}
    if isinstance(value, enum.Enum):
        return {_TAG: "enum", "type": _type_name(type(value)), "name": value.name}
    if isinstance(value, torch.Size):
        return {_TAG: "torch.Size", "items": [int(v) for v in value]}
    if isinstance(value, torch.dtype):
        return {_TAG: "torch.dtype", "name": str(value)[len("torch."):]}
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {_TAG: "bytes", "base64": base64.b64encode(bytes(value)).decode("ascii")}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {_TAG: "dataclass", "type": _type_name(type(value)),
                "fields": {f.name: _encode(getattr(value, f.name), "{}.{}".format(path, f.name), d)
                           for f in dataclasses.fields(value)}}
    if isinstance(value, list):
        return [_encode(v, "{}[{}]".format(path, i), d) for i, v in enumerate(value)]
    if isinstance(value, tuple) and type(value) is tuple:
        return {_TAG: "tuple", "items": [_encode(v, "{}[{}]".format(path, i), d)
                                         for i, v in enumerate(value)]}
    if isinstance(value, (set, frozenset)):
        tag = "set" if isinstance(value, set) else "frozenset"
        return {_TAG: tag, "items": [_encode(v, "{}{{}}".format(path), d) for v in value]}
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value) and _TAG not in value:
            return {k: _encode(v, "{}[{!r}]".format(path, k), d) for k, v in value.items()}
        return {_TAG: "dict", "items": [[_encode(k, path + " key", d),
                                         _encode(v, "{}[{!r}]".format(path, k), d)]
                                        for k, v in value.items()]}
    raise InvalidArgument(
        "{}: a {} is not plain data (None, bool, int, float, str, bytes, list, tuple, "
        "set, dict, torch.Size, torch.dtype, an Enum or a dataclass of them), and rocksdcp "
        "never pickles".format(path, type(value).__module__ + "." + type(value).__qualname__))


def encode(value, what):
    """``value`` as bytes; InvalidArgument naming ``what`` and the path of
    the first part that is not plain data."""
    return PREFIX + json.dumps(_encode(value, what, 0), allow_nan=False,
                               separators=(",", ":")).encode("utf-8")


def _known_class(name):
    if name in _REGISTERED:
        return _REGISTERED[name]
    module, _, qualname = name.partition(":")
    if not (module == "torch" or module.startswith(("torch.", "rocksdcp."))):
        return None
    obj = sys.modules.get(module)
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    return obj if isinstance(obj, type) else None


def _rebuild_dataclass(name, fields):
    cls = _known_class(name)
    if cls is None or not dataclasses.is_dataclass(cls) or \
            {f.name for f in dataclasses.fields(cls)} != set(fields):
        return PlainRecord(name, fields)
    obj = object.__new__(cls)
    for k, v in fields.items():
        object.__setattr__(obj, k, v)
    return obj


def _rebuild_enum(name, member):
    cls = _known_class(name)
    if cls is not None and issubclass(cls, enum.Enum) and member in cls.__members__:
        return cls[member]
    return PlainRecord(name, {"name": member})


def _decode(obj, depth):
    if depth > _MAX_DEPTH:
        raise ValueError("nested more than {} deep".format(_MAX_DEPTH))
    d = depth + 1
    if isinstance(obj, list):
        return [_decode(v, d) for v in obj]
    if not isinstance(obj, dict):
        return obj
    if _TAG not in obj:
        return {k: _decode(v, d) for k, v in obj.items()}
    tag = obj[_TAG]
    if tag in ("tuple", "set", "frozenset", "torch.Size"):
        items = [_decode(v, d) for v in obj["items"]]
        return {"tuple": tuple, "set": set, "frozenset": frozenset, "torch.Size": torch.Size}[tag](items)
    if tag == "dict":
        return {_decode(k, d): _decode(v, d) for k, v in obj["items"]}
    if tag == "bytes":
        return base64.b64decode(obj["base64"], validate=True)
    if tag == "float":
        if obj["value"] not in ("nan", "inf", "-inf"):
            raise ValueError("float {!r}".format(obj["value"]))
        return float(obj["value"])
    if tag == "torch.dtype":
        dtype = getattr(torch, obj["name"], None)
        if not isinstance(dtype, torch.dtype):
            raise ValueError("torch has no dtype {!r}".format(obj["name"]))
        return dtype
    if tag == "dataclass":
        return _rebuild_dataclass(str(obj["type"]), {str(k): _decode(v, d) for k, v in obj["fields"].items()})
    if tag == "enum":
        return _rebuild_enum(str(obj["type"]), str(obj["name"]))
    raise ValueError("unknown tag {!r}".format(tag))


def is_encoded(data):
    return bytes(data[:len(PREFIX)]) == PREFIX


def decode(data, what):
    """The value ``encode`` made; Corruption naming ``what`` if ``data`` is
    not such a value."""
    try:
        return _decode(json.loads(bytes(data[len(PREFIX):]).decode("utf-8")), 0)
    except KeyError as e:
        raise Corruption("{}: not rocksdcp's encoding of plain data: a tagged object lacks "
                         "its field {}".format(what, e)) from None
    except (ValueError, TypeError, AttributeError, RecursionError) as e:
        raise Corruption("{}: not rocksdcp's encoding of plain data: {}".format(what, e)) from None
