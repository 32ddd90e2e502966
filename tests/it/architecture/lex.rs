//! A Rust tokenizer just deep enough for the architecture checker: identifiers, `::`, `->`, `=>`
//! and single punctuation with their line numbers; comments dropped, and string, char and number literals
//! kept as opaque `Lit` tokens, so that nothing written in a comment or a string is read as code.

/// What a token is; the text is kept for identifiers and punctuation only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Ident,
    Punct,
    /// A string, byte string, char or number literal.
    Lit,
    Lifetime,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token {
    pub kind: Kind,
    pub text: String,
    /// 1-based.
    pub line: usize,
}

impl Token {
    pub fn is(&self, text: &str) -> bool {
        self.kind != Kind::Lit && self.text == text
    }
    pub fn ident(&self) -> Option<&str> {
        (self.kind == Kind::Ident).then_some(self.text.as_str())
    }
}

fn ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_'
}

fn ident_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The length of the UTF-8 sequence that starts with `lead`.
fn utf8_len(lead: u8) -> usize {
    match lead {
        0xF0.. => 4,
        0xE0.. => 3,
        0xC0.. => 2,
        _ => 1,
    }
}

/// The tokens of `src`. Unterminated literals and comments run to the end of the text.
pub fn tokens(src: &str) -> Vec<Token> {
    let b = src.as_bytes();
    let mut lx = Lexer { b, i: 0, line: 1 };
    let mut out = Vec::new();
    while let Some(t) = lx.next_token() {
        out.push(t);
    }
    out
}

struct Lexer<'a> {
    b: &'a [u8],
    i: usize,
    line: usize,
}

impl Lexer<'_> {
    fn peek(&self, k: usize) -> Option<u8> {
        self.b.get(self.i + k).copied()
    }

    /// Moves to `to`, counting the newlines passed.
    fn advance_to(&mut self, to: usize) {
        let to = to.min(self.b.len());
        self.line += self.b[self.i..to].iter().filter(|&&c| c == b'\n').count();
        self.i = to;
    }

    fn next_token(&mut self) -> Option<Token> {
        loop {
            let c = self.peek(0)?;
            if c.is_ascii_whitespace() {
                self.advance_to(self.i + 1);
            } else if c == b'/' && self.peek(1) == Some(b'/') {
                let end = self.b[self.i..]
                    .iter()
                    .position(|&c| c == b'\n')
                    .map_or(self.b.len(), |n| self.i + n);
                self.advance_to(end);
            } else if c == b'/' && self.peek(1) == Some(b'*') {
                self.block_comment();
            } else {
                break;
            }
        }
        let line = self.line;
        let c = self.peek(0)?;
        let (kind, text) = if ident_start(c) {
            self.word()
        } else if c.is_ascii_digit() {
            self.number();
            (Kind::Lit, String::new())
        } else if c == b'"' {
            self.quoted(self.i + 1, b'"');
            (Kind::Lit, String::new())
        } else if c == b'\'' {
            self.quote_or_lifetime()
        } else if let Some(two) = [b"::", b"->", b"=>"]
            .into_iter()
            .find(|p| self.b[self.i..].starts_with(*p))
        {
            self.advance_to(self.i + 2);
            (Kind::Punct, String::from_utf8_lossy(two).into_owned())
        } else {
            // One character (a multi-byte one whole), never split inside UTF-8.
            let len = utf8_len(c);
            let end = (self.i + len).min(self.b.len());
            let text = String::from_utf8_lossy(&self.b[self.i..end]).into_owned();
            self.advance_to(self.i + len);
            (Kind::Punct, text)
        };
        Some(Token { kind, text, line })
    }

    /// `/* ... */`, nested.
    fn block_comment(&mut self) {
        let mut depth = 0usize;
        let mut j = self.i;
        while j < self.b.len() {
            if self.b[j] == b'/' && self.b.get(j + 1) == Some(&b'*') {
                depth += 1;
                j += 2;
            } else if self.b[j] == b'*' && self.b.get(j + 1) == Some(&b'/') {
                depth -= 1;
                j += 2;
                if depth == 0 {
                    break;
                }
            } else {
                j += 1;
            }
        }
        self.advance_to(j);
    }

    /// An identifier, a keyword, a raw identifier (`r#fn` reads as `fn`), or a prefixed
    /// literal (`b"..."`, `r#"..."#`, `br"..."`, `c"..."`, `b'x'`).
    fn word(&mut self) -> (Kind, String) {
        let start = self.i;
        let mut j = self.i;
        while j < self.b.len() && ident_char(self.b[j]) {
            j += 1;
        }
        let word = &self.b[start..j];
        let next = self.b.get(j).copied();
        let raw_prefix = matches!(word, b"r" | b"br" | b"cr");
        if raw_prefix && matches!(next, Some(b'"' | b'#')) {
            let hashes = self.b[j..].iter().take_while(|&&h| h == b'#').count();
            if self.b.get(j + hashes) == Some(&b'"') {
                self.raw_string(j + hashes + 1, hashes);
                return (Kind::Lit, String::new());
            }
            if word == b"r" && hashes == 1 && self.b.get(j + 1).is_some_and(|&c| ident_start(c)) {
                self.advance_to(j + 1);
                return self.word();
            }
        }
        if matches!(word, b"b" | b"c") && next == Some(b'"') {
            self.quoted(j + 1, b'"');
            return (Kind::Lit, String::new());
        }
        if word == b"b" && next == Some(b'\'') {
            self.quoted(j + 1, b'\'');
            return (Kind::Lit, String::new());
        }
        self.advance_to(j);
        (Kind::Ident, String::from_utf8_lossy(word).into_owned())
    }

    /// A literal whose body starts at `from` and ends at an unescaped `close`.
    fn quoted(&mut self, from: usize, close: u8) {
        let mut j = from;
        while j < self.b.len() && self.b[j] != close {
            j += if self.b[j] == b'\\' { 2 } else { 1 };
        }
        self.advance_to(j + 1);
    }

    /// A raw string whose body starts at `from`, closed by `"` and `hashes` hashes.
    fn raw_string(&mut self, from: usize, hashes: usize) {
        let mut close = vec![b'"'];
        close.extend(std::iter::repeat_n(b'#', hashes));
        let end = self.b[from..]
            .windows(close.len())
            .position(|w| w == close.as_slice())
            .map_or(self.b.len(), |n| from + n + close.len());
        self.advance_to(end);
    }

    fn number(&mut self) {
        let mut j = self.i;
        while j < self.b.len() && ident_char(self.b[j]) {
            j += 1;
        }
        // A fraction, but not a range (`1..2`) or a method (`1.max(2)`).
        if self.b.get(j) == Some(&b'.') && self.b.get(j + 1).is_some_and(u8::is_ascii_digit) {
            j += 1;
            while j < self.b.len() && ident_char(self.b[j]) {
                j += 1;
            }
        }
        self.advance_to(j);
    }

    /// `'x'`, `'\n'`, `'\u{..}'`, `'{'`, `'é'` are literals; `'a` and `'static` lifetimes.
    fn quote_or_lifetime(&mut self) -> (Kind, String) {
        let rest = &self.b[self.i + 1..];
        if rest.first() == Some(&b'\\') {
            self.quoted(self.i + 1, b'\'');
            return (Kind::Lit, String::new());
        }
        let ch_len = rest.first().map_or(1, |&c| utf8_len(c));
        if rest.get(ch_len) == Some(&b'\'') {
            self.advance_to(self.i + 1 + ch_len + 1);
            return (Kind::Lit, String::new());
        }
        let n = rest.iter().take_while(|&&c| ident_char(c)).count();
        let text = String::from_utf8_lossy(&rest[..n]).into_owned();
        self.advance_to(self.i + 1 + n);
        (Kind::Lifetime, text)
    }
}
