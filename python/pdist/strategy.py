"""pdist.Strategy: Paddle's strategy sections as attributes, checked as they are set.

    strategy = pdist.Strategy()
    strategy.dp_degree = 2
    strategy.sharding.enable = True
    strategy.sharding.stage = 2
    strategy.amp.dtype = "bfloat16"
    pdist.Engine(program, strategy=strategy)

Setting an unknown key raises AttributeError naming the keys there are; a value of the wrong
type raises TypeError. Ranges and the rules between keys (sp needs mp_degree > 1, a stage in
1..3) are the library's: the engine checks the whole strategy when it starts, naming the key.
"""
import copy
import json
import numbers
from collections.abc import Mapping

# Keys and defaults, as strategy/strategy.h (docs/strategy.md).
_TOP = {"dp_degree": 1, "mp_degree": 1, "pp_degree": 1, "sp": False}
_SECTIONS = {
    "sharding": {"enable": False, "stage": 1, "degree": 0, "accumulate_shards": False},
    "pipeline": {"enable": False, "schedule_mode": "1F1B", "accumulate_steps": 1, "micro_batch_size": 1,
                 "vpp_degree": 1, "split_before": []},
    "recompute": {"enable": False, "granularity": "full", "segments": "layers"},
    "amp": {"enable": False, "dtype": "float16", "level": "o1", "use_dynamic_loss_scaling": True,
            "init_loss_scaling": 32768.0, "incr_every_n_steps": 1000, "decr_every_n_nan_or_inf": 2,
            "incr_ratio": 2.0, "decr_ratio": 0.5, "custom_white_list": [], "custom_black_list": []},
    "gradient_merge": {"enable": False, "k_steps": 1, "avg": True},
}


def _checked(path, default, value):
    """`value` if it has the type of `default` (an int where a float is expected is accepted)."""
    if isinstance(default, list):  # split_before (argument-name patterns), amp's custom op lists
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise TypeError(f"strategy key '{path}' must be a list of str, got {value!r}")
        return list(value)
    # numbers.Integral / Real, not int / float: numpy's scalars (np.int64(2)) are numbers too. A
    # bool is an int to Python, never a degree or a count here.
    if isinstance(default, bool):
        # numpy's bool is no bool subclass (np.bool_; np.bool in numpy 2): told by its dtype
        ok = isinstance(value, bool) or (getattr(value, "ndim", None) == 0 and getattr(value, "dtype", None) is not None
                                         and getattr(value.dtype, "kind", "") == "b")
        value = bool(value) if ok else value
    elif isinstance(default, int):
        ok = isinstance(value, numbers.Integral) and not isinstance(value, bool)
        value = int(value) if ok else value  # a plain int: json.dumps takes no numpy scalar
    elif isinstance(default, float):
        ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
        value = float(value) if ok else value
    else:
        ok = isinstance(value, str)
    if not ok:
        raise TypeError(f"strategy key '{path}' must be {type(default).__name__}, got {value!r}")
    return value


def _checked_annotations(value):
    """The strategy's per-tensor annotations: a list of objects (docs/strategy.md); a str or
    another iterable is not taken apart into items."""
    if not isinstance(value, (list, tuple)) or not all(isinstance(a, dict) for a in value):
        raise TypeError(f"strategy key 'annotations' must be a list of objects "
                        f'({{"tensor": ..., "mesh": ..., "placements": ...}}), got {value!r}')
    return copy.deepcopy(list(value))


def config_dict(config, what):
    """A strategy given as a pdist.Strategy, a dict or JSON text (as pdist.Engine takes it) as a
    dict of its keys; None is {}."""
    if config is None:
        return {}
    if isinstance(config, Strategy):
        return config.to_dict(given_only=True)  # the keys set on it; the rest are the defaults
    if isinstance(config, str):
        try:
            config = json.loads(config)
        except ValueError as e:
            raise ValueError(f"{what}: strategy text is not JSON ({e}); a strategy is a pdist.Strategy, a dict or "
                             "JSON text (of a file: open(path).read())") from None
    if not isinstance(config, Mapping):
        raise TypeError(f"{what}: a strategy is a pdist.Strategy, a dict or JSON text of an object, "
                        f"got {type(config).__name__}")
    return config


class _Section:
    def __init__(self, name, defaults, values=None):
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_values", copy.deepcopy(defaults))
        object.__setattr__(self, "_given", set())  # keys set, whatever their value
        for key, value in (values or {}).items():
            setattr(self, key, value)

    def __getattr__(self, key):
        if key.startswith("_"):  # copy and pickle look for hooks before _values exists: no recursion
            raise AttributeError(key)
        try:
            return self._values[key]
        except KeyError:
            raise AttributeError(f"strategy section '{self._name}' has no key '{key}' "
                                 f"(keys: {', '.join(sorted(self._values))})") from None

    def __setattr__(self, key, value):
        if key not in self._values:
            raise AttributeError(f"strategy section '{self._name}' has no key '{key}' "
                                 f"(keys: {', '.join(sorted(self._values))})")
        self._values[key] = _checked(f"{self._name}.{key}", _SECTIONS[self._name][key], value)
        self._given.add(key)

    def __copy__(self):
        # A shallow copy would share the key table with the original.
        return copy.deepcopy(self)

    def to_dict(self, given_only=False):
        values = {k: v for k, v in self._values.items() if not given_only or k in self._given}
        return copy.deepcopy(values)


class Strategy:
    """Paddle's auto-parallel strategy; `config` a dict of the same keys, JSON text of one (as
    pdist.Engine takes it) or another Strategy (docs/strategy.md). Copies (copy.deepcopy) and
    pickles are whole strategies, the keys set on them included."""

    def __init__(self, config=None):
        config = dict(config_dict(config, "pdist.Strategy"))
        object.__setattr__(self, "_top", dict(_TOP))
        object.__setattr__(self, "_given", set())  # top-level keys set
        object.__setattr__(self, "_sections", {name: _Section(name, keys) for name, keys in _SECTIONS.items()})
        object.__setattr__(self, "annotations", _checked_annotations(config.pop("annotations", [])))
        for key, value in config.items():
            if key in self._sections:
                if not isinstance(value, dict):
                    raise TypeError(f"strategy key '{key}' must be an object, got {value!r}")
                for inner, v in value.items():
                    setattr(self._sections[key], inner, v)
            else:
                setattr(self, key, value)

    def __getattr__(self, key):
        if key.startswith("_"):  # copy and pickle look for hooks before _sections exists: no recursion
            raise AttributeError(key)
        if key in self._sections:
            return self._sections[key]
        if key in self._top:
            return self._top[key]
        raise AttributeError(f"strategy has no key '{key}' (keys: {', '.join(sorted([*self._top, *self._sections]))})")

    def __setattr__(self, key, value):
        if key == "annotations":
            object.__setattr__(self, key, _checked_annotations(value))
            return
        if key in self._sections:
            raise AttributeError(f"strategy section '{key}' is set key by key: strategy.{key}.enable = True")
        if key not in self._top:
            raise AttributeError(f"strategy has no key '{key}' (keys: {', '.join(sorted([*self._top, *self._sections]))})")
        self._top[key] = _checked(key, _TOP[key], value)
        self._given.add(key)

    def to_dict(self, given_only=False):
        """Every key, defaults included; with `given_only`, the keys that were set (the choices a
        strategy fixes for pdist.plan, which searches the rest)."""
        out = {k: v for k, v in self._top.items() if not given_only or k in self._given}
        for name, section in self._sections.items():
            values = section.to_dict(given_only)
            if values or not given_only:
                out[name] = values
        if out.get("sharding", {}).get("degree") == 0:  # 0: the whole dp axis, which the JSON says by leaving it out
            del out["sharding"]["degree"]
        if self.annotations or not given_only:
            out["annotations"] = list(self.annotations)
        return out

    def to_json(self):
        return json.dumps(self.to_dict())

    def __eq__(self, other):
        """The same values, and the same keys set (what pdist.plan keeps fixed)."""
        if not isinstance(other, Strategy):
            return NotImplemented
        return self.to_dict() == other.to_dict() and self.to_dict(given_only=True) == other.to_dict(given_only=True)

    __hash__ = None  # mutable

    def __copy__(self):
        # A shallow copy would share the key tables: setting a key on the copy set it on both.
        return copy.deepcopy(self)

    def __repr__(self):
        return f"pdist.Strategy({self.to_dict()!r})"
