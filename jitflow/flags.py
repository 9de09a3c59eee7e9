"""`tf.flags` / `tf.app.flags`: command-line flags, parsed from sys.argv on first use.

`DEFINE_string/integer/float/boolean(name, default, help)` add flags to `FLAGS`. Reading any
attribute of `FLAGS` parses `sys.argv` once (`tf.app.run` parses its `argv` instead); arguments
that are not defined flags are left for the program (`--name=value`, `--name value`, and for
booleans `--name`, `--noname`, `--name=false`).
"""
from __future__ import annotations

import sys
from typing import Any, Callable, Optional

__all__ = ["FLAGS", "DEFINE_string", "DEFINE_integer", "DEFINE_float", "DEFINE_boolean",
           "DEFINE_bool", "DEFINE_list", "DEFINE_enum", "mark_flag_as_required", "Flag",
           "FlagValues", "Error"]


class Error(Exception):
    """A bad flag value or a missing required flag."""


def _parse_bool(text: str) -> bool:
    t = str(text).strip().lower()
    if t in ("true", "t", "1", "yes", "y"):
        return True
    if t in ("false", "f", "0", "no", "n"):
        return False
    raise ValueError(f"Non-boolean argument to boolean flag: {text!r}")


class Flag:
    """One flag: its name, default, help text and the parser of its command-line text."""

    def __init__(self, name: str, default: Any, help: str, parse: Callable,  # noqa: A002
                 is_bool: bool = False) -> None:
        self.name = name
        self.default = None if default is None else parse(default) if isinstance(
            default, str) else default
        self.help = help
        self.parse = parse
        self.is_bool = is_bool
        self.value = self.default
        self.present = False


class FlagValues:
    """The registry of defined flags; attribute access reads (and first parses) values."""

    def __init__(self) -> None:
        object.__setattr__(self, "_flags", {})
        object.__setattr__(self, "_parsed", False)
        object.__setattr__(self, "_required", set())

    def _define(self, flag: Flag) -> None:
        if flag.name in self._flags:
            raise Error(f"The flag '{flag.name}' is defined twice.")
        self._flags[flag.name] = flag

    def _parse(self, args) -> list:
        """Set the values of the flags found in `args`; return the other arguments."""
        rest: list = []
        args = list(args)
        i = 0
        while i < len(args):
            a = args[i]
            i += 1
            if a == "--":
                rest.extend(args[i:])
                break
            if not a.startswith("-") or a == "-":
                rest.append(a)
                continue
            body = a.lstrip("-")
            name, eq, text = body.partition("=")
            flag = self._flags.get(name)
            if flag is None and name.startswith("no") and not eq:
                neg = self._flags.get(name[2:])
                if neg is not None and neg.is_bool:
                    neg.value, neg.present = False, True
                    continue
            if flag is None:
                rest.append(a)
                continue
            if not eq:
                if flag.is_bool:
                    flag.value, flag.present = True, True
                    continue
                if i >= len(args):
                    raise Error(f"Flag --{name} must have a value other than None.")
                text = args[i]
                i += 1
            try:
                flag.value = flag.parse(text)
            except ValueError as e:
                raise Error(f"Illegal value for flag --{name}: {e}") from None
            flag.present = True
        missing = [n for n in self._required if self._flags[n].value is None]
        if missing:
            raise Error(f"Flag --{missing[0]} must have a value other than None.")
        object.__setattr__(self, "_parsed", True)
        return rest

    def __call__(self, argv) -> list:
        """Parse `argv` (argv[0] is the program name); returns argv with the flags removed."""
        argv = list(argv)
        return argv[:1] + self._parse(argv[1:])

    def _ensure_parsed(self) -> None:
        if not self._parsed:
            self._parse(sys.argv[1:])

    def __getattr__(self, name: str):
        flags = object.__getattribute__(self, "_flags")
        if name not in flags:
            raise AttributeError(name)
        self._ensure_parsed()
        return flags[name].value

    def __setattr__(self, name: str, value) -> None:
        if name not in self._flags:
            raise AttributeError(f"Unknown flag {name!r}")
        self._flags[name].value = value

    def __contains__(self, name: str) -> bool:
        return name in self._flags

    def __iter__(self):
        return iter(self._flags)

    def is_parsed(self) -> bool:
        return self._parsed

    def mark_as_parsed(self) -> None:
        object.__setattr__(self, "_parsed", True)

    def flag_values_dict(self) -> dict:
        self._ensure_parsed()
        return {n: f.value for n, f in self._flags.items()}

    def get_flag_value(self, name: str, default):
        f = self._flags.get(name)
        return default if f is None else f.value

    def _reset(self) -> None:
        """Forget every defined flag (for tests)."""
        self._flags.clear()
        self._required.clear()
        object.__setattr__(self, "_parsed", False)


FLAGS = FlagValues()


def _define(name: str, default, help: str, parse: Callable,  # noqa: A002
            flag_values: Optional[FlagValues], is_bool: bool = False) -> Flag:
    fv = flag_values if flag_values is not None else FLAGS
    flag = Flag(name, default, help, parse, is_bool)
    fv._define(flag)
    return flag


def DEFINE_string(name: str, default: Optional[str], help: str,  # noqa: N802,A002
                  flag_values: Optional[FlagValues] = None, **kwargs) -> Flag:
    """A string flag."""
    return _define(name, default, help, str, flag_values)


def DEFINE_integer(name: str, default: Optional[int], help: str,  # noqa: N802,A002
                   lower_bound=None, upper_bound=None,
                   flag_values: Optional[FlagValues] = None, **kwargs) -> Flag:
    """An integer flag (optionally bounded)."""
    def parse(text):
        v = int(text)
        if (lower_bound is not None and v < lower_bound) or \
                (upper_bound is not None and v > upper_bound):
            raise ValueError(f"{v} is outside [{lower_bound}, {upper_bound}]")
        return v
    return _define(name, default, help, parse, flag_values)


def DEFINE_float(name: str, default: Optional[float], help: str,  # noqa: N802,A002
                 lower_bound=None, upper_bound=None,
                 flag_values: Optional[FlagValues] = None, **kwargs) -> Flag:
    """A float flag (optionally bounded)."""
    def parse(text):
        v = float(text)
        if (lower_bound is not None and v < lower_bound) or \
                (upper_bound is not None and v > upper_bound):
            raise ValueError(f"{v} is outside [{lower_bound}, {upper_bound}]")
        return v
    return _define(name, default, help, parse, flag_values)


def DEFINE_boolean(name: str, default: Optional[bool], help: str,  # noqa: N802,A002
                   flag_values: Optional[FlagValues] = None, **kwargs) -> Flag:
    """A boolean flag: `--name`, `--noname`, `--name=true|false`."""
    return _define(name, default, help, _parse_bool, flag_values, is_bool=True)


DEFINE_bool = DEFINE_boolean


def DEFINE_list(name: str, default, help: str,  # noqa: N802,A002
                flag_values: Optional[FlagValues] = None, **kwargs) -> Flag:
    """A comma-separated list of strings."""
    def parse(text):
        return [s for s in str(text).split(",") if s] if isinstance(text, str) else list(text)
    return _define(name, default, help, parse, flag_values)


def DEFINE_enum(name: str, default: Optional[str], enum_values, help: str,  # noqa: N802,A002
                flag_values: Optional[FlagValues] = None, **kwargs) -> Flag:
    """A string flag restricted to `enum_values`."""
    allowed = list(enum_values)

    def parse(text):
        if text not in allowed:
            raise ValueError(f"value should be one of <{'|'.join(allowed)}>")
        return text
    return _define(name, default, help, parse, flag_values)


def mark_flag_as_required(name: str, flag_values: Optional[FlagValues] = None) -> None:
    """Parsing fails unless the flag gets a value other than None."""
    fv = flag_values if flag_values is not None else FLAGS
    fv._required.add(name)
