//! A gzip body built from separately compressed pieces, so `/metrics` compresses the large
//! classification once per index generation and only the small self-metrics per scrape.
//!
//! A deflate stream is a run of blocks. A piece compressed up to a sync flush ends on a byte
//! boundary with no final block, so another piece's blocks can follow it; the last piece ends
//! the stream. The gzip trailer's CRC-32 of the whole input is combined from the pieces' own.
//! The result is one ordinary gzip member (RFC 1952), which every client reads; concatenated
//! members would be valid too, but not every decoder reads past the first.

use bytes::Bytes;
use crc32fast::Hasher;
use flate2::{Compress, Compression, FlushCompress, Status};

/// Scrapes are latency-bound and the text is repetitive: the fastest level already shrinks it
/// about tenfold (docs/benchmarks.md).
const LEVEL: u32 = 1;

/// gzip header: magic, deflate, no flags, no mtime (the body must not depend on the clock),
/// no extra flags, unknown OS.
const HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255];

/// Compressed input and what the trailer needs to know of it.
#[derive(Clone, Debug)]
pub struct Deflated {
    pub bytes: Bytes,
    crc: Hasher,
    len: u64,
}

#[derive(Debug, thiserror::Error)]
#[error("deflate failed: {0}")]
pub struct DeflateError(#[from] flate2::CompressError);

impl Deflated {
    /// A piece that others follow: ends with a sync flush, not a final block.
    pub fn leading(input: &[u8]) -> Result<Self, DeflateError> {
        Self::compress(input, FlushCompress::Sync)
    }

    /// The piece that ends the stream.
    pub fn last(input: &[u8]) -> Result<Self, DeflateError> {
        Self::compress(input, FlushCompress::Finish)
    }

    fn compress(input: &[u8], flush: FlushCompress) -> Result<Self, DeflateError> {
        let mut compress = Compress::new(Compression::new(LEVEL), false);
        let mut out = Vec::with_capacity(input.len() / 4 + 64);
        loop {
            if out.capacity() - out.len() < 64 {
                out.reserve(out.capacity());
            }
            let consumed = usize::try_from(compress.total_in()).unwrap_or(input.len()).min(input.len());
            let status = compress.compress_vec(&input[consumed..], &mut out, flush)?;
            let all_in = compress.total_in() == input.len() as u64;
            // Done when the input is in and the flush fitted: room was left over (sync), or the
            // stream ended (finish).
            let done = match flush {
                FlushCompress::Finish => status == Status::StreamEnd,
                _ => all_in && out.len() < out.capacity(),
            };
            if done {
                break;
            }
        }
        let mut crc = Hasher::new();
        crc.update(input);
        Ok(Self { bytes: Bytes::from(out), crc, len: input.len() as u64 })
    }
}

/// One gzip member around `leading` pieces and the `last`, as chunks to send in order.
pub fn member(leading: &[&Deflated], last: &Deflated) -> Vec<Bytes> {
    let mut crc = Hasher::new();
    let mut len = 0u64;
    let mut chunks = Vec::with_capacity(leading.len() + 3);
    chunks.push(Bytes::from_static(&HEADER));
    for piece in leading.iter().copied().chain([last]) {
        crc.combine(&piece.crc);
        len += piece.len;
        chunks.push(piece.bytes.clone());
    }
    let mut trailer = Vec::with_capacity(8);
    trailer.extend_from_slice(&crc.finalize().to_le_bytes());
    // ISIZE is the input length modulo 2^32.
    trailer.extend_from_slice(&((len & u64::from(u32::MAX)) as u32).to_le_bytes());
    chunks.push(Bytes::from(trailer));
    chunks
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    fn gunzip(chunks: &[Bytes]) -> Vec<u8> {
        let body: Vec<u8> = chunks.iter().flat_map(|c| c.iter().copied()).collect();
        // A single-member reader: it must not need to read past the first member.
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(body.as_slice()).read_to_end(&mut out).expect("valid gzip");
        out
    }

    fn sample(lines: usize, seed: u64) -> Vec<u8> {
        (0..lines)
            .map(|i| format!("daemonset_misscheduled_pod_info{{pod=\"p-{i}-{seed}\",reason=\"taint_added\"}} 1\n"))
            .collect::<String>()
            .into_bytes()
    }

    #[test]
    fn pieces_make_one_member_of_their_concatenation() {
        let cached = Deflated::leading(&sample(20_000, 1)).expect("deflates");
        for scrape in 0..3 {
            let live = sample(10, scrape);
            let body = member(&[&cached], &Deflated::last(&live).expect("deflates"));
            let mut expected = sample(20_000, 1);
            expected.extend_from_slice(&live);
            assert_eq!(gunzip(&body), expected);
        }
    }

    #[test]
    fn empty_pieces_and_a_lone_last_piece_are_valid() {
        let empty = Deflated::leading(b"").expect("deflates");
        assert_eq!(gunzip(&member(&[&empty], &Deflated::last(b"x").expect("deflates"))), b"x");
        assert_eq!(gunzip(&member(&[], &Deflated::last(b"").expect("deflates"))), b"");
        let many = [&empty, &empty];
        assert_eq!(gunzip(&member(&many, &Deflated::last(b"tail").expect("deflates"))), b"tail");
    }

    #[test]
    fn the_text_shrinks_well_even_at_the_fastest_level() {
        let text = sample(20_000, 7);
        let body = member(&[], &Deflated::last(&text).expect("deflates"));
        let wire: usize = body.iter().map(Bytes::len).sum();
        assert!(wire * 5 < text.len(), "{wire} bytes for {}", text.len());
    }

    #[test]
    fn a_corrupted_trailer_is_caught_by_the_reader() {
        let mut body = member(&[], &Deflated::last(b"payload").expect("deflates"));
        let trailer = body.pop().expect("trailer");
        let mut wrong = trailer.to_vec();
        wrong[0] ^= 1;
        body.push(Bytes::from(wrong));
        let joined: Vec<u8> = body.iter().flat_map(|c| c.iter().copied()).collect();
        let mut out = Vec::new();
        assert!(flate2::read::GzDecoder::new(joined.as_slice()).read_to_end(&mut out).is_err());
    }
}
