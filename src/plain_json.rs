//! A strict walk over plain JSON (keys and strings without escapes, integers): the cheap first reading of a hot message, which leaves anything else to serde.
//!
//! serde_json reads a small message at a cost of a few hundred instructions per key and
//! string (callgrind of 5ef9bf3: a `tools/call` line's envelope 6.1k instructions, an
//! upstream answer's head 3.2k). The messages on the call path are plainer than what JSON
//! allows, and [`Walk`] reads them byte by byte. It takes only what it can read exactly as
//! serde would; on anything else (an escape, a float, a key it was not asked for, broken
//! JSON) its readers return `None`, and the caller reads the message with serde as before.
//! A call's arguments become an object (validation reads them so): built by the walk when
//! they are flat and plain, by serde otherwise; a value kept as text (a result) is checked
//! by the walk when it is small and shallow, by serde otherwise. [`write_str`] and
//! [`write_object`] go the other way, for a raw call's request line.

use serde::de::DeserializeOwned;
use serde_json::value::RawValue;

mod write;
pub(crate) use write::{write_object, write_str};

/// A position in one message.
#[derive(Clone)]
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
    /// is UTF-8; anything else the caller refuses). Scanned a word at a time ([`special`]):
    /// these strings are short, and `memchr` costs more to start than such a string to walk.
    pub fn plain_bytes(&mut self) -> Option<&'a [u8]> {
        self.eat(b'"')?;
        let start = self.at;
        let mut at = start;
        loop {
            at += special(&self.bytes[at..])?;
            match self.bytes[at] {
                b'"' => {
                    self.at = at + 1;
                    return Some(&self.bytes[start..at]);
                }
                0x80.. => at += 1,
                _ => return None,
            }
        }
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

    /// A JSON object as serde reads it into a map: walked when it is flat and plain (each
    /// value a string without escapes, an integer within `i64`, `true`, `false` or `null`),
    /// read by serde otherwise.
    pub fn json_object(&mut self) -> Option<serde_json::Map<String, serde_json::Value>> {
        let mut flat = self.clone();
        match flat.flat_object() {
            Some(map) => {
                *self = flat;
                Some(map)
            }
            None => self.object_by_serde(),
        }
    }

    /// [`json_object`](Self::json_object)'s walk: members inserted in order, as serde's map
    /// visitor inserts them (a repeated key keeps its last value).
    fn flat_object(&mut self) -> Option<serde_json::Map<String, serde_json::Value>> {
        use serde_json::Value;
        let mut map = serde_json::Map::new();
        self.object(|key, walk| {
            let key = std::str::from_utf8(key).ok()?;
            let value = match walk.peek()? {
                b'"' => Value::String(walk.plain_str()?.to_owned()),
                b't' if walk.literal(b"true") => Value::Bool(true),
                b'f' if walk.literal(b"false") => Value::Bool(false),
                b'n' if walk.literal(b"null") => Value::Null,
                _ => Value::from(walk.integer()?),
            };
            map.insert(key.to_owned(), value);
            Some(())
        })?;
        Some(map)
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
    ///
    /// Iterative: the containers open are bits of one word (set for an object), so `depth`
    /// is at most 64 ([`DEPTH`]); a deeper limit is left to the recursive walk.
    fn skip(&mut self, depth: u32, ascii: &mut bool) -> Option<()> {
        if depth > u64::BITS {
            return self.skip_members(depth, ascii, None);
        }
        let mut objects = 0u64;
        let mut open = 0u32;
        loop {
            // A value.
            match self.peek()? {
                b'"' => self.skip_string(ascii)?,
                b't' => self.literal(b"true").then_some(())?,
                b'f' => self.literal(b"false").then_some(())?,
                b'n' => self.literal(b"null").then_some(())?,
                byte @ (b'{' | b'[') => {
                    if open >= depth {
                        return None;
                    }
                    self.at += 1;
                    let close = if byte == b'{' { b'}' } else { b']' };
                    if self.peek()? == close {
                        self.at += 1;
                    } else {
                        objects = (objects << 1) | u64::from(byte == b'{');
                        open += 1;
                        if byte == b'{' {
                            self.key(ascii)?;
                        }
                        continue;
                    }
                }
                _ => self.skip_number()?,
            }
            // After a value: the containers it ends, then the next member, or the end.
            loop {
                if open == 0 {
                    return Some(());
                }
                let object = objects & 1 == 1;
                match self.peek()? {
                    b',' => {
                        self.at += 1;
                        if object {
                            self.key(ascii)?;
                        }
                        break;
                    }
                    b'}' if object => {}
                    b']' if !object => {}
                    _ => return None,
                }
                self.at += 1;
                objects >>= 1;
                open -= 1;
            }
        }
    }

    /// An object member's key and its colon.
    fn key(&mut self, ascii: &mut bool) -> Option<()> {
        if self.peek()? != b'"' {
            return None;
        }
        self.skip_string(ascii)?;
        self.eat(b':')
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
            self.at += special(&self.bytes[self.at..])?;
            match self.bytes[self.at] {
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

/// Where the first byte of `text` that ends a plain run of string text is: `"`, `\\`, a
/// control character or a byte that is not ASCII. Eight bytes at a time (a word's bytes
/// tested together), then byte by byte for the last few.
fn special(text: &[u8]) -> Option<usize> {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    let mut at = 0;
    while let Some(word) = text.get(at..at + 8) {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(word);
        let x = u64::from_le_bytes(bytes);
        // A byte's high bit is set here where that byte is below 0x20, is `"` or `\\` (each a
        // zero after the xor), or is not ASCII; the lowest such byte is exact (a borrow only
        // reaches the bytes above a true match).
        let control = x.wrapping_sub(ONES * 0x20) & !x;
        let quote =
            (x ^ (ONES * u64::from(b'"'))).wrapping_sub(ONES) & !(x ^ (ONES * u64::from(b'"')));
        let slash =
            (x ^ (ONES * u64::from(b'\\'))).wrapping_sub(ONES) & !(x ^ (ONES * u64::from(b'\\')));
        let found = (control | quote | slash | x) & HIGH;
        if found != 0 {
            return Some(at + (found.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    text[at..]
        .iter()
        .position(|&b| matches!(b, b'"' | b'\\' | 0..=0x1f | 0x80..))
        .map(|i| at + i)
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
mod tests;
