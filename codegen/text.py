"""Python source for bytes -> JSON text of metadata records, one function per struct version.

`dump-log --json` and the Spark source want a record's JsonConverter layout as text, and
building an object, then a dict, then encoding it costs three passes over every field. These
functions read the wire bytes into locals and write the text at once, with the same keys in
the same order and the same value text as `compact_json(record.to_json(version))`.

They only ever have to agree with the object decoder on good input: a caller that sees any
failure decodes the value again with the object decoder, whose DecodeError is the report. So
they check what makes a value bad (lengths, UTF-8, tags) and leave naming the field to it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kraftpy.codegen.schema import FIXED_SIZES, STRUCT_CODES, Field, FieldType, Struct, lower_camel

if TYPE_CHECKING:
    from kraftpy.codegen.emit import ModuleEmitter, _Code

# What a module with text functions imports and defines for them.
PREAMBLE_IMPORTS = (
    "from binascii import b2a_base64 as _b2a",
    "from json import JSONEncoder as _JE",
    "from json.encoder import encode_basestring as _js",
)
PREAMBLE_DEFS = (
    "_URLSAFE = bytes.maketrans(b'+/', b'-_')",
    "_Z16 = bytes(16)",
    "_jv = _JE(separators=(',', ':'), ensure_ascii=False).encode",
    "_UT = {}  # uuid bytes -> text; topic and broker ids recur",
    "_FI = tuple('[' + ','.join(['%d'] * n) + ']' for n in range(64))  # int arrays by count",
    "\n\ndef _tu(r):\n"
    "    t = '\"' + _b2a(r, newline=False)[:22].translate(_URLSAFE).decode() + '\"'\n"
    "    if len(_UT) >= 65536:\n"
    "        _UT.clear()\n"
    "    _UT[r] = t\n"
    "    return t",
)


class Unsupported(Exception):
    """A shape the text functions do not cover; the object path serves that version."""


def _uuid_text(x: str) -> str:
    return f"(_UT.get({x}) or _tu({x}))"


def _scalar_text(kind: str, x: str) -> str:
    """A text expression for one non-null value of a primitive kind."""
    if kind == "bool":
        return f"('true' if {x} else 'false')"
    if kind == "float64":
        return f"_jv({x})"
    if kind == "string":
        return f"_js({x})"
    if kind in ("bytes", "records"):
        return f"'\"' + _jb({x}) + '\"'"
    if kind == "uuid":
        return _uuid_text(x)
    return f"str({x})"


def _default_check(f: Field, x: str) -> str:
    """True when the local `x` (as the text functions hold it) differs from the default."""
    from kraftpy.codegen.emit import _is_default_check

    if f.type.kind == "struct" or (f.type.kind == "array" and f.type.elem.kind == "struct"
                                   and f.default not in (None, [])):
        raise Unsupported(f"tagged struct {f.name}")
    if f.default == "uuid0":
        return f"{x} != _Z16"
    return _is_default_check(f, x, {})


_INTS = ("int8", "int16", "uint16", "int32", "uint32", "int64")
_ARRAY_NAMES = {"b": "int8", "h": "int16", "H": "uint16", "i": "int32", "I": "uint32",
                "q": "int64"}


class TextEmitter:
    def __init__(self, m: ModuleEmitter):
        self.m = m
        self.done: dict[str, dict[int, str]] = {}
        self.texts: set[str] = set()  # locals that hold their field's text already

    def text_fn(self, struct: Struct, version: int) -> str:
        from kraftpy.codegen.emit import _Code

        done = self.done.setdefault(struct.name, {})
        if version in done:
            return done[version]
        m = self.m
        for f in struct.fields:
            if version in f.versions:
                t = f.type.elem if f.type.kind == "array" else f.type
                if t.kind == "struct":
                    self.text_fn(m.spec.structs[t.struct], version)
        m.tmp = 0
        self.texts = set()
        c = _Code()
        c(1, "L = len(b)")
        live = [f for f in struct.fields if version in f.versions]
        regular = [f for f in live if version not in f.tagged]
        tagged = [f for f in live if version in f.tagged]
        local = {f.name: m.var("x") for f in live}
        run: list[Field] = []
        for f in regular + [None]:  # type: ignore[list-item]
            if f is not None and f.type.fixed and version not in f.nullable:
                run.append(f)
                continue
            if run:
                codes = "".join(STRUCT_CODES[r.type.kind] for r in run)
                targets = ", ".join(local[r.name] for r in run)
                c(1, f"{targets}, = {m.fmt(codes)}.unpack_from(b, p)")
                c(1, f"p += {sum(FIXED_SIZES[r.type.kind] for r in run)}")
                run = []
            if f is not None:
                self._read(c, 1, f, f.type, version in f.nullable, version, local[f.name])
        if version in m.spec.flexible:
            self._read_tags(c, struct, tagged, version, local)
        self._assemble(c, live, version, local)
        name = m._register("t", struct, version, c.lines, "b, p")
        done[version] = name
        return name

    def _read(self, c: _Code, ind: int, f: Field | None, t: FieldType, nullable: bool,
              version: int, x: str) -> None:
        m = self.m
        k = t.kind
        if k == "uuid":
            c(ind, f"{x} = {m.fmt('16s')}.unpack_from(b, p)[0]")
            c(ind, "p += 16")
            return
        if k == "struct":
            fn = self.text_fn(m.spec.structs[t.struct], version)
            if nullable:
                c(ind, "if b[p] >= 128:")
                c(ind + 1, "p += 1")
                c(ind + 1, f"{x} = None")
                c(ind, "else:")
                c(ind + 1, f"{x}, p = {fn}(b, p + 1)")
            else:
                c(ind, f"{x}, p = {fn}(b, p)")
            return
        if k == "array" and t.elem.kind in _INTS and f is not None and version in m.spec.flexible \
                and (version not in f.tagged or f.default is None):
            self._read_int_array_text(c, ind, f, t, nullable, version, x)
            return
        if k != "array" or t.elem.kind not in ("uuid", "struct"):
            m._read(c, ind, f, t, nullable, version, x)
            return
        n = m.var("n")
        m._read_len(c, ind, n, version in m.spec.flexible, wide=True)
        m._null_or_neg(c, ind, n, x, nullable, "array")
        esize = FIXED_SIZES.get(t.elem.kind, 1)
        c(ind + 1, f"if {n} * {esize} > L - p:")
        c(ind + 2, f"raise _DecodeError('array of ' + str({n}) + ' elements cannot fit in ' + str(L - p) + ' bytes', offset=p)")
        if t.elem.kind == "uuid":
            c(ind + 1, f"{x} = [b[i:i + 16] for i in range(p, p + 16 * {n}, 16)]")
            c(ind + 1, f"p += 16 * {n}")
            return
        fn = self.text_fn(m.spec.structs[t.elem.struct], version)
        c(ind + 1, f"{x} = []")
        c(ind + 1, f"for _ in range({n}):")
        c(ind + 2, f"it, p = {fn}(b, p)")
        c(ind + 2, f"{x}.append(it)")

    def _read_int_array_text(self, c: _Code, ind: int, f: Field, t: FieldType, nullable: bool,
                             version: int, x: str) -> None:
        """An int array read straight into its text (None when null): the usual short one
        formatted from the unpacked tuple, any other through the decoder's reading code."""
        m = self.m
        size, code = FIXED_SIZES[t.elem.kind], STRUCT_CODES[t.elem.kind]
        m.arrays.add(code)
        n, lst = m.var("n"), m.var("l")
        c(ind, f"{n} = b[p]")
        c(ind, f"if 0 < {n} < 65 and p + {size} * {n} - {size - 1} <= L:")
        c(ind + 1, f"{x} = _FI[{n} - 1] % _A_{_ARRAY_NAMES[code]}[{n} - 1].unpack_from(b, p + 1)")
        c(ind + 1, f"p += {size} * {n} - {size - 1}")
        c(ind, "else:")
        m._read(c, ind + 1, f, t, nullable, version, lst)
        if nullable:
            c(ind + 1, f"{x} = None if {lst} is None else str({lst}).replace(' ', '')")
        else:
            c(ind + 1, f"{x} = str({lst}).replace(' ', '')")
        self.texts.add(x)

    def _read_tags(self, c: _Code, struct: Struct, tagged: list[Field], version: int,
                   local: dict[str, str]) -> None:
        from kraftpy.codegen.emit import _default_expr

        m = self.m
        for f in tagged:
            if f.type.kind == "uuid":
                c(1, f"{local[f.name]} = _Z16")
            elif f.type.kind == "struct":
                raise Unsupported(f"tagged struct {f.name}")
            else:
                c(1, f"{local[f.name]} = {_default_expr(f, m.names)}")
        n, t, z, e = (m.var(v) for v in ("tn", "tag", "tz", "te"))
        c(1, f"{n} = b[p]")
        c(1, "p += 1")
        c(1, f"if {n}:")
        c(2, f"if {n} >= 128:")
        c(3, f"{n}, p = _ruv(b, p - 1)")
        c(2, f"if {n} > L - p:")
        c(3, "raise _DecodeError('tagged fields cannot fit', offset=p)")
        c(2, f"for _ in range({n}):")
        for var in (t, z):
            c(3, f"{var} = b[p]")
            c(3, f"if {var} < 128:")
            c(4, "p += 1")
            c(3, "else:")
            c(4, f"{var}, p = _ruv(b, p)")
        c(3, f"{e} = p + {z}")
        c(3, f"if {e} > L:")
        c(4, "raise _DecodeError('tagged field is truncated', offset=p)")
        kw = "if"
        for f in sorted(tagged, key=lambda f: f.tag):
            c(3, f"{kw} {t} == {f.tag}:")
            kw = "elif"
            self._read(c, 4, f, f.type, version in f.nullable, version, local[f.name])
            c(4, f"if p != {e}:")
            c(5, "raise _DecodeError('tagged field size does not match its content', offset=p)")
        other = sorted({f.tag for f in struct.fields if f.tag is not None} - {f.tag for f in tagged})
        if other:
            c(3, f"{kw} {t} in {tuple(other)!r}:")
            c(4, "raise _DecodeError('tag not valid for this version', offset=p)")
        c(3, f"p = {e}")

    def _value_text(self, c: _Code, f: Field, version: int, x: str, ind: int = 1) -> str:
        """Statements that leave the field's text in a local (or an inline expression)."""
        t = f.type
        nullable = version in f.nullable
        k = t.kind
        if k in ("int8", "int16", "uint16", "int32", "uint32", "int64"):
            return x
        if k == "bool":
            return f"\"true\" if {x} else \"false\""
        j = self.m.var("j")
        if k == "struct" or x in self.texts:
            expr = x
        elif k == "array":
            el = t.elem
            if el.kind == "struct":
                items = x
            elif el.kind in ("int8", "int16", "uint16", "int32", "uint32", "int64"):
                items = None  # a list of ints prints as JSON but for its spaces
            elif el.kind in ("string",):
                items = f"map(_js, {x})"
            else:
                items = f"[{_scalar_text(el.kind, 'e')} for e in {x}]"
            if items is None:
                expr = f"(str({x}).replace(' ', '') if {x} else '[]')"
            else:
                expr = f"'[' + ','.join({items}) + ']'"
        else:
            expr = _scalar_text(k, x)
        if x in self.texts and not nullable:
            return x
        if nullable or k == "struct":
            c(ind, f"{j} = 'null' if {x} is None else {expr}")
        else:
            c(ind, f"{j} = {expr}")
        return j

    def _assemble(self, c: _Code, live: list[Field], version: int, local: dict[str, str]) -> None:
        if not live:
            c(1, "return '{}', p")
            return
        tagged = [version in f.tagged for f in live]
        if tagged[0]:
            c(1, "q = []")
        head: list[str] = []
        opened = False
        for f, is_tagged in zip(live, tagged, strict=True):
            x = local[f.name]
            key = f'"{lower_camel(f.name)}":'
            if not is_tagged:
                value = self._value_text(c, f, version, x)
                if tagged[0]:
                    c(1, f"q.append(f'{key}{{{value}}}')")
                elif not opened:
                    head.append(f"{key}{{{value}}}")
                else:
                    c(1, f"r += f',{key}{{{value}}}'")
                continue
            if not tagged[0] and not opened:
                c(1, f"r = f'{{{{{','.join(head)}'")
                opened = True
            c(1, f"if {_default_check(f, x)}:")
            value = self._value_text(c, f, version, x, ind=2)
            if tagged[0]:
                c(2, f"q.append(f'{key}{{{value}}}')")
            else:
                c(2, f"r += f',{key}{{{value}}}'")
        if tagged[0]:
            c(1, "return '{' + ','.join(q) + '}', p")
        elif not opened:
            c(1, f"return f'{{{{{','.join(head)}}}}}', p")
        else:
            c(1, "return r + '}', p")
