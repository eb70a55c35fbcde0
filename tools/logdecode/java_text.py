"""Bytes to text exactly as Java's `new String(bytes, UTF_8)` makes it, which is how Kafka's
default dump decoder (StringDecoder) shows keys and values.

Valid UTF-8 decodes the same in Python and Java. Malformed input does not always: both put
U+FFFD in place of each malformed sequence, but they cut the sequences differently (an encoded
surrogate such as ED A0 80 is one U+FFFD in Java, three in Python). So valid input takes
Python's decoder, and anything else the walk below, which follows the JDK's decoding loop
(`String.decodeUTF8_UTF16`) case by case.
"""

from __future__ import annotations

REPLACEMENT = "\ufffd"


def java_utf8(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return _replacing(data)


def _cont(b: int) -> bool:
    return b & 0xC0 == 0x80


def _replacing(src: bytes) -> str:
    out: list[str] = []
    put = out.append
    sp, sl = 0, len(src)
    while sp < sl:
        b1 = src[sp]
        sp += 1
        if b1 < 0x80:
            put(chr(b1))
        elif 0xC2 <= b1 <= 0xDF:  # two bytes
            if sp < sl:
                b2 = src[sp]
                if _cont(b2):
                    sp += 1
                    put(chr(((b1 & 0x1F) << 6) | (b2 & 0x3F)))
                else:
                    put(REPLACEMENT)  # b2 is read again
                continue
            put(REPLACEMENT)
            break
        elif 0xE0 <= b1 <= 0xEF:  # three bytes
            if sp + 1 < sl:
                b2, b3 = src[sp], src[sp + 1]
                if (b1 == 0xE0 and b2 & 0xE0 == 0x80) or not _cont(b2) or not _cont(b3):
                    put(REPLACEMENT)
                    sp += 0 if (b1 == 0xE0 and b2 & 0xE0 == 0x80) or not _cont(b2) else 1
                else:
                    sp += 2
                    c = ((b1 & 0x0F) << 12) | ((b2 & 0x3F) << 6) | (b3 & 0x3F)
                    put(REPLACEMENT if 0xD800 <= c <= 0xDFFF else chr(c))
                continue
            if sp < sl and ((b1 == 0xE0 and src[sp] & 0xE0 == 0x80) or not _cont(src[sp])):
                put(REPLACEMENT)
                continue
            put(REPLACEMENT)
            break
        elif 0xF0 <= b1 <= 0xF7:  # four bytes
            if sp + 2 < sl:
                b2, b3, b4 = src[sp], src[sp + 1], src[sp + 2]
                uc = ((b1 & 0x07) << 18) | ((b2 & 0x3F) << 12) | ((b3 & 0x3F) << 6) | (b4 & 0x3F)
                if not (_cont(b2) and _cont(b3) and _cont(b4)) or not 0x10000 <= uc <= 0x10FFFF:
                    put(REPLACEMENT)
                    if (b1 > 0xF4 or (b1 == 0xF0 and not 0x90 <= b2 <= 0xBF)
                            or (b1 == 0xF4 and b2 & 0xF0 != 0x80) or not _cont(b2)):
                        pass  # one byte taken
                    elif not _cont(b3):
                        sp += 1
                    else:
                        sp += 2
                else:
                    sp += 3
                    put(chr(uc))
                continue
            if b1 > 0xF4 or (sp < sl and ((b1 == 0xF0 and not 0x90 <= src[sp] <= 0xBF)
                                          or (b1 == 0xF4 and src[sp] & 0xF0 != 0x80)
                                          or not _cont(src[sp]))):
                put(REPLACEMENT)
                continue
            sp += 1
            put(REPLACEMENT)
            if sp < sl and not _cont(src[sp]):
                continue
            break
        else:
            put(REPLACEMENT)
    return "".join(out)
