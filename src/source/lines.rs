//! A watch response split into its lines. tokio-util's `AnyDelimiterCodec` tests every byte
//! against its list of delimiters, and that loop was a fifth of the exporter's CPU to ready
//! on a streamed list; `memchr` finds the newline a word or a vector at a time.
//!
//! The body is split as its chunks arrive, without reading it into a buffer first: an
//! identity body's chunks as hyper gives them, an inflated one's as the decoder fills them.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Bytes, BytesMut};
use futures::{Stream, StreamExt};

#[derive(Debug, thiserror::Error)]
pub enum LineError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("longer than {0} bytes")]
    TooLong(usize),
}

/// The lines of a body as its chunks arrive: at most `max` bytes each, without their newline.
/// A last line with no newline is still a line: the caller's decoder then says whether it was
/// cut. A line that lies within one chunk is a slice of it; only one that spans chunks is
/// copied. Reading the body into a buffer to split it copied every byte once more.
pub struct ChunkLines<S> {
    chunks: S,
    max: usize,
    /// What is left of the last chunk, after the lines taken from it.
    rest: Bytes,
    /// The start of a line that began in an earlier chunk.
    carry: BytesMut,
    ended: bool,
}

impl<S> ChunkLines<S> {
    pub fn new(chunks: S, max: usize) -> Self {
        Self { chunks, max, rest: Bytes::new(), carry: BytesMut::new(), ended: false }
    }

    /// The lines end with an error: nothing after it is read.
    fn fail(&mut self, error: LineError) -> LineError {
        (self.rest, self.carry, self.ended) = (Bytes::new(), BytesMut::new(), true);
        error
    }
}

impl<S: Stream<Item = Result<Bytes, std::io::Error>> + Unpin> Stream for ChunkLines<S> {
    type Item = Result<Bytes, LineError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(at) = memchr::memchr(b'\n', &this.rest) {
                let line = this.rest.split_to(at + 1).slice(..at);
                if this.carry.len() + at > this.max {
                    return Poll::Ready(Some(Err(this.fail(LineError::TooLong(this.max)))));
                }
                if this.carry.is_empty() {
                    return Poll::Ready(Some(Ok(line)));
                }
                this.carry.extend_from_slice(&line);
                return Poll::Ready(Some(Ok(this.carry.split().freeze())));
            }
            this.carry.extend_from_slice(&std::mem::take(&mut this.rest));
            if this.carry.len() > this.max {
                return Poll::Ready(Some(Err(this.fail(LineError::TooLong(this.max)))));
            }
            if this.ended {
                return Poll::Ready((!this.carry.is_empty()).then(|| Ok(this.carry.split().freeze())));
            }
            match ready!(this.chunks.poll_next_unpin(cx)) {
                Some(Ok(chunk)) => this.rest = chunk,
                Some(Err(error)) => return Poll::Ready(Some(Err(this.fail(LineError::Io(error))))),
                None => this.ended = true,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;

    use super::*;

    fn split(chunks: &[&[u8]], max: usize) -> Vec<Result<Vec<u8>, String>> {
        let chunks = futures::stream::iter(chunks.iter().map(|c| Ok(Bytes::copy_from_slice(c))));
        let out: Vec<_> = ChunkLines::new(chunks, max)
            .map(|line| line.map(|l| l.to_vec()).map_err(|e| e.to_string()))
            .collect::<Vec<_>>()
            .now_or_never()
            .expect("the chunks are all there");
        let first_error = out.iter().position(Result::is_err);
        assert!(first_error.is_none_or(|at| at + 1 == out.len()), "the lines end at an error: {out:?}");
        out
    }

    fn lines_of(chunks: Vec<Result<Bytes, std::io::Error>>) -> Vec<Result<Bytes, LineError>> {
        let lines = ChunkLines::new(futures::stream::iter(chunks), 64).collect::<Vec<_>>();
        lines.now_or_never().expect("the chunks are all there")
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
    fn a_line_within_a_chunk_is_a_slice_of_it() {
        let chunk = Bytes::from_static(b"{\"a\":1}\n{\"b\":2}\n{\"c\"");
        let start = chunk.as_ptr();
        let lines: Vec<_> =
            lines_of(vec![Ok(chunk), Ok(Bytes::from_static(b":3}\n"))]).into_iter().map(Result::unwrap).collect();
        assert_eq!(lines, [&b"{\"a\":1}"[..], b"{\"b\":2}", b"{\"c\":3}"]);
        assert_eq!(lines[1].as_ptr(), start.wrapping_add(8), "not copied");
    }

    #[test]
    fn a_read_error_ends_the_lines_with_it() {
        let lines = lines_of(vec![Ok(Bytes::from_static(b"ok\npart")), Err(std::io::Error::other("cut"))]);
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].as_deref().unwrap(), b"ok");
        assert!(matches!(&lines[1], Err(LineError::Io(e)) if e.to_string() == "cut"));
    }

    #[test]
    fn a_line_over_the_limit_is_an_error_found_or_not() {
        assert_eq!(split(&[b"12345\n"], 5), [Ok(b"12345".to_vec())]);
        assert_eq!(split(&[b"123456\n"], 5), [Err("longer than 5 bytes".into())]);
        assert_eq!(split(&[b"ok\n", b"1234", b"56"], 5), [Ok(b"ok".to_vec()), Err("longer than 5 bytes".into())]);
    }
}
