//! A watch response split into its lines. tokio-util's `AnyDelimiterCodec` tests every byte
//! against its list of delimiters, and that loop was a fifth of the exporter's CPU to ready
//! on a streamed list; `memchr` finds the newline a word or a vector at a time.

use bytes::BytesMut;
use tokio_util::codec::Decoder;

#[derive(Debug, thiserror::Error)]
pub enum LineError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("longer than {0} bytes")]
    TooLong(usize),
}

/// Lines of at most `max` bytes, without their newline. A last line with no newline is
/// still a line: the caller's decoder then says whether it was cut.
pub struct Lines {
    max: usize,
    /// How much of the buffer holds no newline: searched already, on the last call.
    searched: usize,
}

impl Lines {
    pub fn new(max: usize) -> Self {
        Self { max, searched: 0 }
    }
}

impl Decoder for Lines {
    type Item = BytesMut;
    type Error = LineError;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<BytesMut>, LineError> {
        match memchr::memchr(b'\n', &buf[self.searched..]) {
            Some(at) => {
                let end = self.searched + at;
                self.searched = 0;
                if end > self.max {
                    return Err(LineError::TooLong(self.max));
                }
                let mut line = buf.split_to(end + 1);
                line.truncate(end);
                Ok(Some(line))
            }
            None if buf.len() > self.max => Err(LineError::TooLong(self.max)),
            None => {
                self.searched = buf.len();
                Ok(None)
            }
        }
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<BytesMut>, LineError> {
        if let Some(line) = self.decode(buf)? {
            return Ok(Some(line));
        }
        self.searched = 0;
        Ok((!buf.is_empty()).then(|| buf.split()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(chunks: &[&[u8]], max: usize) -> Vec<Result<Vec<u8>, String>> {
        let mut lines = Lines::new(max);
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        for chunk in chunks {
            buf.extend_from_slice(chunk);
            loop {
                match lines.decode(&mut buf) {
                    Ok(Some(line)) => out.push(Ok(line.to_vec())),
                    Ok(None) => break,
                    Err(error) => return [out, vec![Err(error.to_string())]].concat(),
                }
            }
        }
        while let Some(line) = lines.decode_eof(&mut buf).transpose() {
            out.push(line.map(|l| l.to_vec()).map_err(|e| e.to_string()));
        }
        out
    }

    #[test]
    fn lines_split_anywhere_come_back_whole() {
        let text = b"{\"a\":1}\n{\"b\":22}\n\n{\"c\":333}\n";
        let whole = split(&[text], 64);
        assert_eq!(whole, [&b"{\"a\":1}"[..], b"{\"b\":22}", b"", b"{\"c\":333}"].map(|l| Ok(l.to_vec())));
        for cut in 0..text.len() {
            assert_eq!(split(&[&text[..cut], &text[cut..]], 64), whole, "cut at {cut}");
        }
        let bytewise: Vec<&[u8]> = text.chunks(1).collect();
        assert_eq!(split(&bytewise, 64), whole);
    }

    #[test]
    fn a_last_line_without_its_newline_is_still_given() {
        assert_eq!(split(&[b"{\"a\":1}\n{\"b\""], 64), [Ok(b"{\"a\":1}".to_vec()), Ok(b"{\"b\"".to_vec())]);
    }

    #[test]
    fn a_line_over_the_limit_is_an_error_found_or_not() {
        assert_eq!(split(&[b"12345\n"], 5), [Ok(b"12345".to_vec())]);
        assert_eq!(split(&[b"123456\n"], 5), [Err("longer than 5 bytes".into())]);
        assert_eq!(split(&[b"ok\n", b"1234", b"56"], 5), [Ok(b"ok".to_vec()), Err("longer than 5 bytes".into())]);
    }
}
