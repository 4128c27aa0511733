//! A strict walk over plain JSON (keys and strings without escapes, integers): the cheap first reading of a hot message, which leaves anything else to serde.
//!
//! serde_json reads a small message at a cost of a few hundred instructions per key and
//! string (callgrind of 5ef9bf3: a `tools/call` line's envelope 6.1k instructions, an
//! upstream answer's head 3.2k). The messages on the call path are plainer than what JSON
//! allows, and [`Walk`] reads them byte by byte. It takes only what it can read exactly as
//! serde would; on anything else (an escape, a float, a key it was not asked for, broken
//! JSON) its readers return `None`, and the caller reads the message with serde as before.
//! A call's arguments go through serde (validation reads them as an object); a value kept
//! as text (a result) is checked by the walk when it is small and shallow, by serde otherwise.

use serde::de::DeserializeOwned;
use serde_json::value::RawValue;

/// A position in one message.
pub(crate) struct Walk<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Walk<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, at: 0 }
    }

    /// Whether only blanks are left.
    pub fn at_end(&mut self) -> bool {
        self.blank();
        self.at == self.bytes.len()
    }

    /// Skips JSON's four blanks.
    fn blank(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(self.at) {
            self.at += 1;
        }
    }

    /// The next byte after blanks, not taken.
    pub fn peek(&mut self) -> Option<u8> {
        self.blank();
        self.bytes.get(self.at).copied()
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        (self.peek()? == byte).then(|| self.at += 1)
    }

    /// Takes `word` (`null`, say) if it comes next.
    pub fn literal(&mut self, word: &[u8]) -> bool {
        self.blank();
        let found = self.bytes[self.at..].starts_with(word);
        if found {
            self.at += word.len();
        }
        found
    }

    /// A string with no escape and no control character (which serde refuses in a string),
    /// as bytes: not checked as UTF-8, so only for comparing with ASCII text (an ASCII match
    /// is UTF-8; anything else the caller refuses). A byte loop: these strings are short, and
    /// `memchr` and `from_utf8` cost more to start than such a string costs to walk.
    pub fn plain_bytes(&mut self) -> Option<&'a [u8]> {
        self.eat(b'"')?;
        let rest = &self.bytes[self.at..];
        let end = rest
            .iter()
            .position(|&b| matches!(b, b'"' | b'\\' | 0..=0x1f))?;
        if rest[end] != b'"' {
            return None;
        }
        self.at += end + 1;
        Some(&rest[..end])
    }

    /// [`plain_bytes`](Self::plain_bytes) checked as UTF-8.
    pub fn plain_str(&mut self) -> Option<&'a str> {
        std::str::from_utf8(self.plain_bytes()?).ok()
    }

    /// A plain string of ASCII digits after `prefix` (`"tg-17"`), as a number.
    pub fn prefixed_number(&mut self, prefix: &[u8]) -> Option<u64> {
        let digits = self.plain_bytes()?.strip_prefix(prefix)?;
        if digits.is_empty() {
            return None;
        }
        digits.iter().try_fold(0u64, |n, &b| {
            let digit = b.checked_sub(b'0').filter(|d| *d < 10)?;
            n.checked_mul(10)?.checked_add(u64::from(digit))
        })
    }

    /// `-?(0|[1-9][0-9]*)` within `i64` (no `-0`, no fraction or exponent).
    pub fn integer(&mut self) -> Option<i64> {
        self.blank();
        let negative = self.bytes.get(self.at) == Some(&b'-');
        if negative {
            self.at += 1;
        }
        let rest = &self.bytes[self.at..];
        let end = rest
            .iter()
            .position(|b| !b.is_ascii_digit())
            .unwrap_or(rest.len());
        let digits = &rest[..end];
        match digits {
            // 19 digits fit a `u64`; `i64` needs no more.
            [] | [b'0', _, ..] => return None,
            _ if digits.len() > 19 => return None,
            [b'0'] if negative => return None,
            _ => {}
        }
        self.at += end;
        if let Some(b'.' | b'e' | b'E') = self.bytes.get(self.at) {
            return None;
        }
        let value = digits
            .iter()
            .fold(0u64, |n, &b| n * 10 + u64::from(b - b'0'));
        match negative {
            false => i64::try_from(value).ok(),
            true if value <= 1 << 63 => Some((value as i64).wrapping_neg()),
            true => None,
        }
    }

    /// Walks an object's members; `each` reads the value of the key it is given (a key
    /// it does not want, or a value it cannot read, ends the walk with `None`).
    pub fn object(
        &mut self,
        mut each: impl FnMut(&'a [u8], &mut Self) -> Option<()>,
    ) -> Option<()> {
        self.eat(b'{')?;
        if self.peek()? == b'}' {
            self.at += 1;
            return Some(());
        }
        loop {
            // A key is only compared with the caller's ASCII keys.
            let key = self.plain_bytes()?;
            self.eat(b':')?;
            each(key, self)?;
            match self.peek()? {
                b',' => self.at += 1,
                b'}' => {
                    self.at += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// An object read by serde (a value that ends at its own closing byte).
    pub fn object_by_serde<T: DeserializeOwned>(&mut self) -> Option<T> {
        if self.peek()? != b'{' {
            return None;
        }
        // The stream stops at the object's `}` and says where that was.
        let mut stream =
            serde_json::Deserializer::from_slice(&self.bytes[self.at..]).into_iter::<T>();
        let value = stream.next()?.ok()?;
        self.at += stream.byte_offset();
        Some(value)
    }

    /// Any value, checked as serde checks a raw value and left as text: where it is in the
    /// message. Walked here when it is small and not deeper than [`DEPTH`]; otherwise
    /// checked by serde (whose string scan goes 8 bytes at a time).
    pub fn raw_value(&mut self) -> Option<(usize, usize)> {
        self.raw_value_keyed(None).map(|(span, _)| span)
    }

    /// [`raw_value`](Self::raw_value), also giving `each` the members of the value when it is
    /// an object (each key as written between its quotes, escapes and all, and its value's
    /// text): `true` with the span when the walk checked the value itself and so gave every
    /// member, `false` when serde checked it and gave none. Members given before the walk
    /// failed do not count: the caller keeps them only with `true`.
    pub fn raw_value_keyed(
        &mut self,
        each: Option<&mut dyn FnMut(&'a [u8], &'a [u8])>,
    ) -> Option<((usize, usize), bool)> {
        self.blank();
        let start = self.at;
        if self.bytes.len() - start <= WALKED_BYTES {
            let mut ascii = true;
            if self.skip_members(DEPTH, &mut ascii, each).is_some() {
                let text = &self.bytes[start..self.at];
                // serde checks a raw value's text as UTF-8 once, at its end.
                return (ascii || std::str::from_utf8(text).is_ok())
                    .then_some(((start, self.at), true));
            }
            self.at = start;
        }
        let mut stream =
            serde_json::Deserializer::from_slice(&self.bytes[start..]).into_iter::<&RawValue>();
        let raw = stream.next()?.ok()?;
        // The raw value's text is the message's own, past any blank the stream skipped.
        let from = raw.get().as_ptr() as usize - self.bytes.as_ptr() as usize;
        self.at = start + stream.byte_offset();
        Some(((from, from + raw.get().len()), false))
    }

    /// Skips one value as serde's `ignore_value` does (escapes checked for form only, as
    /// serde does for a value it does not decode); `None` where serde would fail, or at
    /// `depth` 0. `ascii` is cleared on a byte that is not ASCII.
    fn skip(&mut self, depth: u32, ascii: &mut bool) -> Option<()> {
        self.skip_members(depth, ascii, None)
    }

    /// [`skip`](Self::skip), giving `each` (if any) the members of the value when it is an
    /// object (its own members, not those of the values inside it).
    fn skip_members(
        &mut self,
        depth: u32,
        ascii: &mut bool,
        mut each: Option<&mut dyn FnMut(&'a [u8], &'a [u8])>,
    ) -> Option<()> {
        let close = match self.peek()? {
            b'"' => return self.skip_string(ascii),
            b't' => return self.literal(b"true").then_some(()),
            b'f' => return self.literal(b"false").then_some(()),
            b'n' => return self.literal(b"null").then_some(()),
            b'{' => b'}',
            b'[' => b']',
            _ => return self.skip_number(),
        };
        let depth = depth.checked_sub(1)?;
        self.at += 1;
        if self.peek()? == close {
            self.at += 1;
            return Some(());
        }
        loop {
            let mut key: &[u8] = &[];
            if close == b'}' {
                if self.peek()? != b'"' {
                    return None;
                }
                let from = self.at + 1;
                self.skip_string(ascii)?;
                key = &self.bytes[from..self.at - 1];
                self.eat(b':')?;
            }
            self.blank();
            let from = self.at;
            self.skip(depth, ascii)?;
            if close == b'}'
                && let Some(each) = each.as_mut()
            {
                each(key, &self.bytes[from..self.at]);
            }
            match self.peek()? {
                b',' => self.at += 1,
                byte if byte == close => {
                    self.at += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// A string, at its opening quote.
    fn skip_string(&mut self, ascii: &mut bool) -> Option<()> {
        self.at += 1;
        loop {
            let rest = &self.bytes[self.at..];
            let special = rest
                .iter()
                .position(|&b| matches!(b, b'"' | b'\\' | 0..=0x1f | 0x80..))?;
            self.at += special;
            match rest[special] {
                b'"' => {
                    self.at += 1;
                    return Some(());
                }
                b'\\' => match *self.bytes.get(self.at + 1)? {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.at += 2,
                    b'u' => {
                        let hex = self.bytes.get(self.at + 2..self.at + 6)?;
                        if !hex.iter().all(u8::is_ascii_hexdigit) {
                            return None;
                        }
                        self.at += 6;
                    }
                    _ => return None,
                },
                0x80.. => {
                    *ascii = false;
                    self.at += 1;
                }
                _ => return None,
            }
        }
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`, JSON's number.
    fn skip_number(&mut self) -> Option<()> {
        if self.bytes.get(self.at) == Some(&b'-') {
            self.at += 1;
        }
        match *self.bytes.get(self.at)? {
            b'0' => {
                self.at += 1;
                if let Some(b'0'..=b'9') = self.bytes.get(self.at) {
                    return None;
                }
            }
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.bytes.get(self.at) == Some(&b'.') {
            self.at += 1;
            self.some_digits()?;
        }
        if let Some(b'e' | b'E') = self.bytes.get(self.at) {
            self.at += 1;
            if let Some(b'+' | b'-') = self.bytes.get(self.at) {
                self.at += 1;
            }
            self.some_digits()?;
        }
        Some(())
    }

    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.bytes.get(self.at) {
            self.at += 1;
        }
    }

    /// At least one digit.
    fn some_digits(&mut self) -> Option<()> {
        let from = self.at;
        self.digits();
        (self.at > from).then_some(())
    }
}

/// How deep [`Walk::raw_value`] walks a value itself (serde's own limit is 128).
const DEPTH: u32 = 64;

/// The longest rest of a message whose value [`Walk::raw_value`] walks itself: a byte at a
/// time beats serde on short text, not on long strings.
const WALKED_BYTES: usize = 1024;

/// Every message one edit away from `message`: cut at each byte, each byte removed, and each
/// of `bytes` put in its place and before it. For tests that compare a walk with serde.
#[cfg(test)]
pub(crate) fn one_edit_away(message: &[u8], bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut edits = Vec::new();
    for at in 0..=message.len() {
        edits.push(message[..at].to_vec());
        if at == message.len() {
            break;
        }
        let mut removed = message.to_vec();
        removed.remove(at);
        edits.push(removed);
        for &byte in bytes {
            let mut replaced = message.to_vec();
            replaced[at] = byte;
            edits.push(replaced);
            let mut inserted = message.to_vec();
            inserted.insert(at, byte);
            edits.push(inserted);
        }
    }
    edits
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_read_within_i64_and_the_rest_refused() {
        let read = |text: &str| Walk::new(text.as_bytes()).integer();
        assert_eq!(read("0"), Some(0));
        assert_eq!(read(" -17"), Some(-17));
        assert_eq!(read("9223372036854775807"), Some(i64::MAX));
        assert_eq!(read("-9223372036854775808"), Some(i64::MIN));
        for refused in [
            "9223372036854775808",
            "-9223372036854775809",
            "99999999999999999999",
            "-0",
            "01",
            "1.0",
            "1e2",
            "-",
            "x",
        ] {
            assert_eq!(read(refused), None, "{refused}");
        }
    }

    #[test]
    fn a_raw_value_is_found_where_serde_finds_it() {
        for text in [
            r#" {"a":[1,-2.5e+3,"\u00e9\n",true,null]} "#,
            r#""é""#,
            "[]",
            "0",
        ] {
            let mut walk = Walk::new(text.as_bytes());
            let (start, end) = walk.raw_value().unwrap();
            let serde: &RawValue = serde_json::from_str(text).unwrap();
            assert_eq!(&text[start..end], serde.get());
        }
        for refused in [
            r#"{"a":01}"#,
            r#"["\x"]"#,
            "[1,]",
            r#"{"a" 1}"#,
            "tru",
            "\"\u{1}\"",
        ] {
            assert_eq!(Walk::new(refused.as_bytes()).raw_value(), None, "{refused}");
        }
    }
}
