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
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(default, float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        value = float(value) if ok else value
    else:
        ok = isinstance(value, str)
    if not ok:
        raise TypeError(f"strategy key '{path}' must be {type(default).__name__}, got {value!r}")
    return value


class _Section:
    def __init__(self, name, defaults, values=None):
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_values", copy.deepcopy(defaults))
        object.__setattr__(self, "_given", set())  # keys set, whatever their value
        for key, value in (values or {}).items():
            setattr(self, key, value)

    def __getattr__(self, key):
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

    def to_dict(self, given_only=False):
        values = {k: v for k, v in self._values.items() if not given_only or k in self._given}
        return copy.deepcopy(values)


class Strategy:
    """Paddle's auto-parallel strategy; `config` a dict of the same keys (docs/strategy.md)."""

    def __init__(self, config=None):
        config = dict(config or {})
        object.__setattr__(self, "_top", dict(_TOP))
        object.__setattr__(self, "_given", set())  # top-level keys set
        object.__setattr__(self, "_sections", {name: _Section(name, keys) for name, keys in _SECTIONS.items()})
        object.__setattr__(self, "annotations", list(config.pop("annotations", [])))
        for key, value in config.items():
            if key in self._sections:
                if not isinstance(value, dict):
                    raise TypeError(f"strategy key '{key}' must be an object, got {value!r}")
                for inner, v in value.items():
                    setattr(self._sections[key], inner, v)
            else:
                setattr(self, key, value)

    def __getattr__(self, key):
        if key in self._sections:
            return self._sections[key]
        if key in self._top:
            return self._top[key]
        raise AttributeError(f"strategy has no key '{key}' (keys: {', '.join(sorted([*self._top, *self._sections]))})")

    def __setattr__(self, key, value):
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

    def __repr__(self):
        return f"pdist.Strategy({self.to_dict()!r})"
